package outbox

import (
	"context"
	"errors"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

// A notice for the main chat goes to the main group's chat as a notice;
// without a main group (or a MainChat at all) it is refused with
// ErrNoMain and nothing is queued.
func TestTellMainQueuesANoticeOnlyWhenThereIsAMainGroup(t *testing.T) {
	ctx := context.Background()
	registered := false
	main := &mock.MainChat{MainChatFn: func(context.Context) (string, string, bool) { return "main", mainJID, registered }}
	e := newEnvTelling(t, main)
	if err := e.out.TellMain(ctx, "early"); !errors.Is(err, ErrNoMain) {
		t.Fatalf("no main group: %v", err)
	}
	if err := newEnv(t).out.TellMain(ctx, "to no one"); !errors.Is(err, ErrNoMain) {
		t.Fatalf("no MainChat: %v", err)
	}
	registered = true
	if err := e.out.TellMain(ctx, "hello owner"); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != 1 {
		t.Fatalf("%d rows queued, want 1", n)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE chat_jid = ? AND text = 'hello owner' AND kind = ?`, mainJID, KindNotice); n != 1 {
		t.Error("the notice is not queued for the main chat")
	}
}
