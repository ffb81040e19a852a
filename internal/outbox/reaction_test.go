package outbox

import (
	"context"
	"errors"
	"testing"
)

// A reaction reaches the channel in its chat's order, as a reaction: the
// emoji as text, the message it is about and that message's author.
func TestReactionIsSentInOrder(t *testing.T) {
	e := newEnv(t)
	enqueue(t, e, famJID, "before")
	tx, err := e.db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.out.EnqueueReactionTx(context.Background(), tx, famJID, "3EB0C4", "alice@s.whatsapp.net", "👍", KindIPC); err != nil {
		t.Fatal(err)
	}
	if _, err := e.out.EnqueueReactionTx(context.Background(), tx, "", "3EB0C4", "", "👍", KindIPC); !errors.Is(err, ErrNoChat) {
		t.Errorf("a reaction without a chat: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	enqueue(t, e, famJID, "after")
	e.start(t)
	if m := e.rec.Next(t); m.Text != "before" || m.ReactTo != "" {
		t.Fatalf("first %+v", m)
	}
	if m := e.rec.Next(t); m.Text != "👍" || m.ReactTo != "3EB0C4" || m.ReactSender != "alice@s.whatsapp.net" || m.File != nil {
		t.Fatalf("second %+v, want the reaction", m)
	}
	if m := e.rec.Next(t); m.Text != "after" || m.ReactTo != "" {
		t.Fatalf("third %+v", m)
	}
}
