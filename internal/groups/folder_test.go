package groups

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/groupfstest"
)

// txRecorder is a Reporter that keeps what was recorded in transactions
// that committed.
type txRecorder struct {
	groupfstest.Reporter
	flushed int
}

func (r *txRecorder) RecordTx(ctx context.Context, _ *store.Tx, v security.Violation, _ bool) error {
	return r.Report(ctx, v)
}
func (r *txRecorder) Flush(context.Context) error { r.flushed++; return nil }

// A removed group's folder stays; what its agent left there — logs/ and a
// dangling CLAUDE.md linked into a host directory — must not lead the
// registration of a group on that folder out of it.
func TestRegisteringDoesNotFollowLinksInTheFolder(t *testing.T) {
	db, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	groupsDir := t.TempDir()
	rep := &txRecorder{}
	r := New(db, groupsDir)
	r.Reporter = rep
	c := groupfstest.NewCanary(t)
	folder := filepath.Join(groupsDir, "family")
	c.Link(t, filepath.Join(folder, "logs"))
	c.Link(t, filepath.Join(folder, "CLAUDE.md"), filepath.Join(c.Dir, "cron-job"))

	if err := r.Add(context.Background(), Group{JID: "local:family", Name: "Family", Folder: "family"}); err != nil {
		t.Fatal(err)
	}
	c.Intact(t)
	groupfstest.IsRealDir(t, filepath.Join(folder, "logs"))
	rep.Reported(t, filepath.Join(folder, "logs"))
	rep.Reported(t, filepath.Join(folder, "CLAUDE.md"))
	if b, err := os.ReadFile(filepath.Join(folder, "CLAUDE.md")); err != nil || !strings.Contains(string(b), "Family") {
		t.Errorf("CLAUDE.md = %q, %v; want the starter notes", b, err)
	}
	if rep.flushed != 1 {
		t.Errorf("Flush called %d times after the commit, want 1", rep.flushed)
	}
}
