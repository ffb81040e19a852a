package ipc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// ipc/errors keeps what fits: a refused file past its 1,000 entries or
// 100 MiB is deleted, and its refusal is audited all the same.
func TestQuarantineIsBounded(t *testing.T) {
	t.Run("size", func(t *testing.T) {
		h := newHarness(t)
		h.start(t)
		// A sparse file of 900 MiB takes no room in the group's folder,
		// but would in the quarantine's count.
		path := filepath.Join(h.root, "family", layout.MessagesDir, "sparse.json")
		f, err := os.Create(path + ".tmp") // published whole, by the rename
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(900 << 20); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
		checkDeleted(t, h, path, "over the 1 MiB limit")
	})
	t.Run("entries", func(t *testing.T) {
		h := newHarness(t)
		errs := h.layout.IPCErrors()
		for i := range errorsMaxEntries - 1 {
			if err := os.WriteFile(filepath.Join(errs, fmt.Sprintf("old-%04d", i)), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		h.start(t)
		checkDeleted(t, h, h.drop(t, "family", layout.MessagesDir, []byte("{not json")), "bad JSON")
		if n := len(mustReadDir(t, errs)); n > errorsMaxEntries {
			t.Errorf("ipc/errors holds %d entries", n)
		}
	})
}

// checkDeleted waits for path's refusal and checks that the file is gone
// and was not kept in ipc/errors.
func checkDeleted(t *testing.T, h *harness, path, reason string) {
	t.Helper()
	e := h.next(t)
	if e.kind != "violation" || !strings.Contains(e.v.Detail, reason) {
		t.Fatalf("got %+v; want the refusal audited (%q)", e, reason)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("%s still in place (%v)", path, err)
	}
	for _, d := range mustReadDir(t, h.layout.IPCErrors()) {
		if strings.Contains(d.Name(), filepath.Base(path)) {
			t.Errorf("kept in ipc/errors past its bound: %s", d.Name())
		}
	}
}
