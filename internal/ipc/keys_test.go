package ipc

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// After a quiet week the prune empties the journal; a plain row id would
// start at 1 again, and a file's id must name it for ever (AUTOINCREMENT).
func TestKeysNotReusedAfterPrune(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	first := h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "before the quiet week"))
	h.w.handle(ctx, ref{"family", layout.MessagesDir, filepath.Base(first)})
	k1 := h.expectSend(t, "family", "family@g.us", "before the quiet week").key

	h.w.now = func() time.Time { return time.Now().Add(8 * 24 * time.Hour) }
	h.w.prune(ctx)
	var n int
	h.db.QueryRowContext(ctx, `SELECT count(*) FROM ipc_journal`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d rows left after the prune, want 0 (the case where ids restart)", n)
	}
	second := h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "after the quiet week"))
	h.w.handle(ctx, ref{"family", layout.MessagesDir, filepath.Base(second)})
	if k2 := h.expectSend(t, "family", "family@g.us", "after the quiet week").key; k2 == k1 {
		t.Errorf("the new file got the old file's key %q", k1)
	}
}

// A file is removed before its journal entry is marked done, so a file
// found after that is a new one, even with the same name and content: it
// is carried out, with a new key.
func TestSameNameAndContentAgainIsANewFile(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	path := h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "good morning"))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for i := range 3 {
		if i > 0 {
			if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
				t.Fatal(err)
			}
			os.Rename(path+".tmp", path)
		}
		h.w.handle(ctx, ref{"family", layout.MessagesDir, filepath.Base(path)})
		e := h.expectSend(t, "family", "family@g.us", "good morning")
		if keys[e.key] {
			t.Fatalf("round %d reused key %q", i, e.key)
		}
		keys[e.key] = true
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Fatalf("round %d: file not removed (%v)", i, err)
		}
	}
	// Handling the same (now absent) file again does nothing.
	h.w.handle(ctx, ref{"family", layout.MessagesDir, filepath.Base(path)})
	select {
	case e := <-h.effects.events:
		t.Errorf("a handled file acted again: %+v", e)
	default:
	}
}
