// Package outboxtest holds a Sender for tests of the outbox and of what
// queues into it: it records what it accepted and refuses what the test
// says it should.
package outboxtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// Deadline bounds every wait for a message.
const Deadline = 10 * time.Second

// Recorder is an outbox.Sender: the refuse function, when set, decides
// whether to refuse a message; every accepted message is kept and
// announced to Next.
type Recorder struct {
	mu       sync.Mutex
	refuse   func(m channel.Outgoing) error
	sent     []channel.Outgoing
	inFlight map[string]bool
	overlap  bool // two sends to one chat at once
	got      chan channel.Outgoing
}

// NewRecorder returns a Recorder that accepts everything.
func NewRecorder() *Recorder {
	return &Recorder{inFlight: map[string]bool{}, got: make(chan channel.Outgoing, 10000)}
}

// Send records m unless the refuse function returns an error.
func (r *Recorder) Send(ctx context.Context, m channel.Outgoing) error {
	r.mu.Lock()
	if r.inFlight[m.ChatJID] {
		r.overlap = true
	}
	r.inFlight[m.ChatJID] = true
	refuse := r.refuse
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight[m.ChatJID] = false
		r.mu.Unlock()
	}()
	if refuse != nil {
		if err := refuse(m); err != nil {
			return err
		}
	}
	r.mu.Lock()
	r.sent = append(r.sent, m)
	r.mu.Unlock()
	r.got <- m
	return nil
}

// Refuse sets the function that decides whether a message is refused (nil:
// accept all).
func (r *Recorder) Refuse(f func(m channel.Outgoing) error) {
	r.mu.Lock()
	r.refuse = f
	r.mu.Unlock()
}

// Refusing returns the function set by Refuse, so a test can wrap it.
func (r *Recorder) Refusing() func(m channel.Outgoing) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refuse
}

// Sent returns every accepted message so far.
func (r *Recorder) Sent() []channel.Outgoing {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]channel.Outgoing(nil), r.sent...)
}

// Overlapped says whether two sends to one chat ever ran at once.
func (r *Recorder) Overlapped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.overlap
}

// Next waits for the next accepted message.
func (r *Recorder) Next(t testing.TB) channel.Outgoing {
	t.Helper()
	select {
	case m := <-r.got:
		return m
	case <-time.After(Deadline):
		t.Fatalf("no message sent within %s", Deadline)
		return channel.Outgoing{}
	}
}

// Extra returns an accepted message Next has not returned yet, if any.
func (r *Recorder) Extra() (channel.Outgoing, bool) {
	select {
	case m := <-r.got:
		return m, true
	default:
		return channel.Outgoing{}, false
	}
}
