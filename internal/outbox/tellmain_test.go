package outbox

import (
	"context"
	"errors"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

// A notice for the main chat goes to the main group's chat as a notice;
// without a main group (or a MainChat at all) TellMainTx refuses it with
// ErrNoMain, and TellMain queues nothing.
func TestTellMainQueuesANoticeOnlyWhenThereIsAMainGroup(t *testing.T) {
	ctx := context.Background()
	registered := false
	main := &mock.MainChat{MainChatFn: func(context.Context) (string, string, bool) { return "main", mainJID, registered }}
	e := newEnvTelling(t, main)
	e.out.TellMain(ctx, "early")
	bare := newEnv(t)
	bare.out.TellMain(ctx, "to no one")
	if n := bare.count(t, `SELECT count(*) FROM outbox`); n != 0 {
		t.Fatalf("no MainChat: %d rows queued", n)
	}
	err := e.out.db.Do(ctx, func(tx *store.Tx) error { return e.out.TellMainTx(ctx, tx, "in a tx") })
	if !errors.Is(err, ErrNoMain) {
		t.Fatalf("no main group: %v", err)
	}
	registered = true
	e.out.TellMain(ctx, "hello owner")
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != 1 {
		t.Fatalf("%d rows queued, want 1", n)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE chat_jid = ? AND text = 'hello owner' AND kind = ?`, mainJID, KindNotice); n != 1 {
		t.Error("the notice is not queued for the main chat")
	}
}
