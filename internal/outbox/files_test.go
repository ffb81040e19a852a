package outbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// enqueueFile queues text with a copy of a file holding content, as the
// IPC watcher does, and returns the copy's path.
func enqueueFile(t *testing.T, e *env, dir, text, content string) string {
	t.Helper()
	path := filepath.Join(dir, text+".copy")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tx, err := e.db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := e.out.EnqueueFileTx(context.Background(), tx, famJID, text, KindIPC,
		channel.Attachment{Name: "report.pdf", MIME: "application/pdf", Path: path}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return path
}

// A message with a file reaches the channel with its attachment, after
// the text messages queued before it; the copy is removed once it is
// sent, and once it is given up.
func TestFileMessageIsSentInOrderAndItsCopyRemoved(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	enqueue(t, e, famJID, "before")
	sent := enqueueFile(t, e, dir, "caption", "%PDF-1.4")
	gone := fmt.Errorf("not in group: %w", channel.ErrUndeliverable)
	refuseText(e, map[string]error{"doomed": gone})
	doomed := enqueueFile(t, e, dir, "doomed", "%PDF-1.4")
	e.start(t)

	if m := e.rec.Next(t); m.Text != "before" || m.File != nil {
		t.Fatalf("first message %+v, want the text queued first, without a file", m)
	}
	m := e.rec.Next(t)
	if m.Text != "caption" || m.File == nil || *m.File != (channel.Attachment{Name: "report.pdf", MIME: "application/pdf", Path: sent}) {
		t.Fatalf("second message %+v (file %+v), want the caption with the file's name, type and copy", m, m.File)
	}
	waitFor(t, func() bool {
		return e.count(t, `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND failed_at IS NULL`) == 0
	})
	for _, p := range []string{sent, doomed} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("copy %s still there after its message was sent or given up (%v)", filepath.Base(p), err)
		}
	}
}

// SweepFiles removes old copies no waiting message refers to, and keeps
// those one does and those just made.
func TestSweepFilesKeepsWhatAMessageWaitsFor(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	waiting := enqueueFile(t, e, dir, "waiting", "x")
	orphan, fresh := filepath.Join(dir, "orphan"), filepath.Join(dir, "fresh")
	for _, p := range []string{orphan, fresh} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, p := range []string{waiting, orphan} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.out.SweepFiles(context.Background(), dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{waiting: true, orphan: false, fresh: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists = %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	if err := e.out.SweepFiles(context.Background(), filepath.Join(dir, "none"), time.Hour); err != nil {
		t.Errorf("sweeping a missing dir: %v", err)
	}
}
