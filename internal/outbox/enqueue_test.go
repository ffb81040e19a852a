package outbox

import (
	"context"
	"testing"
)

// A message queued in the caller's transaction wakes the outbox when that
// transaction commits, and only then: it is sent without the caller ever
// calling Wake.
func TestEnqueueTxWakesTheOutboxAfterTheCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	woken := func() bool {
		select {
		case <-e.out.wake:
			return true
		default:
			return false
		}
	}
	queue := func(text string, commit bool) {
		t.Helper()
		tx, err := e.db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `INSERT INTO cursors (chat_jid, answered_seq) VALUES (?, 1)
			ON CONFLICT (chat_jid) DO UPDATE SET answered_seq = answered_seq + 1`, famJID); err != nil {
			t.Fatal(err) // the caller's own write, which the message goes with
		}
		if _, err := e.out.EnqueueTx(ctx, tx, famJID, text, KindReply); err != nil {
			t.Fatal(err)
		}
		if woken() {
			t.Fatalf("%q woke the outbox before its commit", text)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}

	queue("rolled back", false)
	if woken() {
		t.Fatal("a message rolled back woke the outbox")
	}
	queue("committed", true)
	if !woken() {
		t.Fatal("the commit did not wake the outbox")
	}
	e.start(t)
	if m := e.rec.Next(t); m.Text != "committed" {
		t.Fatalf("sent %q, want the committed message", m.Text)
	}
	queue("while running", true)
	if m := e.rec.Next(t); m.Text != "while running" {
		t.Fatalf("sent %q, want the message queued while the outbox runs", m.Text)
	}
	if m, ok := e.rec.Extra(); ok {
		t.Errorf("also sent %q", m.Text)
	}
}
