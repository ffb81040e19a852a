package whatsapp

import (
	"context"
	"sync"
	"testing"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"
)

type presenceCall struct {
	jid   types.JID
	state string
}

// fakePresence records presence sends and announces each on sent.
type fakePresence struct {
	mu    sync.Mutex
	calls []presenceCall
	sent  chan presenceCall
	err   error
}

func newFakePresence() *fakePresence { return &fakePresence{sent: make(chan presenceCall, 64)} }

func (f *fakePresence) SendPresence(ctx context.Context, state types.Presence) error {
	if f.err != nil {
		return f.err
	}
	f.sent <- presenceCall{state: string(state)}
	return nil
}

func (f *fakePresence) SendChatPresence(ctx context.Context, jid types.JID, state types.ChatPresence, media types.ChatPresenceMedia) error {
	f.sent <- presenceCall{jid, string(state)}
	return nil
}

// "typing…" is sent at once, refreshed while the agent works, and ended
// with "paused"; a refresh never outlives the "off".
func TestTypingRefreshedUntilOff(t *testing.T) {
	clock := newFakeClock()
	c, _ := newTestChannel(t, Options{})
	c.clock = clock
	c.connected.Store(true)
	p := newFakePresence()
	ctx := context.Background()
	if err := c.setTyping(ctx, p, family, true); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, p.sent); got != (presenceCall{family, "composing"}) {
		t.Fatalf("first presence %v", got)
	}
	for range 3 { // a long run: typing stays up
		tm := recv(t, clock.timers)
		if tm.d != typingRefresh {
			t.Fatalf("refresh waits %v", tm.d)
		}
		clock.fire(tm)
		if got := recv(t, p.sent); got != (presenceCall{family, "composing"}) {
			t.Fatalf("refresh sent %v", got)
		}
	}
	tm := recv(t, clock.timers) // the next refresh is pending
	if err := c.setTyping(ctx, p, family, false); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, p.sent); got != (presenceCall{family, "paused"}) {
		t.Fatalf("end of run sent %v, want paused", got)
	}
	clock.fire(tm) // the stopped refresher must not type again
	c.typingMu.Lock()
	n := len(c.typing)
	c.typingMu.Unlock()
	if n != 0 {
		t.Errorf("%d refreshers left after off", n)
	}
	select {
	case got := <-p.sent:
		t.Errorf("sent %v after typing was turned off", got)
	default:
	}
}

// A run whose "off" never comes stops typing after typingMax.
func TestTypingEndsByItself(t *testing.T) {
	clock := newFakeClock()
	c, _ := newTestChannel(t, Options{})
	c.clock = clock
	c.connected.Store(true)
	p := newFakePresence()
	c.setTyping(context.Background(), p, family, true)
	recv(t, p.sent)
	for i := 1; ; i++ {
		clock.fire(recv(t, clock.timers))
		got := recv(t, p.sent)
		if got.state == "paused" {
			if i != int(typingMax/typingRefresh) {
				t.Errorf("paused after %d refreshes, want %d", i, typingMax/typingRefresh)
			}
			return
		}
	}
}

// Connected announces "unavailable"; without a push name yet it waits
// for it quietly.
func TestAnnounceUnavailable(t *testing.T) {
	c, _ := newTestChannel(t, Options{})
	p := newFakePresence()
	c.announceUnavailable(context.Background(), p)
	if got := recv(t, p.sent); got.state != string(types.PresenceUnavailable) {
		t.Errorf("presence %q, want unavailable", got.state)
	}
	p.err = whatsmeow.ErrNoPushName
	c.announceUnavailable(context.Background(), p) // must not panic or block
}
