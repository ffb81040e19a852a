package nanoclawd

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// House rules the compiler does not keep, checked in every file the
// product is built from: nothing outside the outbox wakes it by hand
// (enqueuing in a transaction wakes it on commit), and test support stands
// apart (nothing imports internal/testkit). That every transaction is
// opened by store.DB.Begin the type keeps: store.DB has no BeginTx.
func TestHouseRules(t *testing.T) {
	rules := []struct {
		needle, owner, why string
	}{
		{".Wake()", "internal/outbox/", "the outbox wakes itself when a transaction that enqueued commits"},
		{"/internal/testkit/", "internal/testkit/", "it imports test support, which the product may not"},
	}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == ".git" || p == filepath.Join("internal", "testkit")) {
			return fs.SkipDir
		}
		if d.IsDir() || filepath.Ext(p) != ".go" || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, r := range rules {
			if bytes.Contains(b, []byte(r.needle)) && !strings.HasPrefix(filepath.ToSlash(p), r.owner) {
				t.Errorf("%s holds %q: %s", p, r.needle, r.why)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
