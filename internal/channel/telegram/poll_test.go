package telegram_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

// owner is the daemon's outbox and audit trail as the channel sees them:
// what the main chat was told, and which updates were skipped.
type owner struct {
	mu      sync.Mutex
	told    []string
	skipped []string
	changed chan struct{}
}

func newOwner() *owner { return &owner{changed: make(chan struct{}, 100)} }

func (o *owner) Notify() {}

func (o *owner) TellMain(_ context.Context, text string) {
	o.mu.Lock()
	o.told = append(o.told, text)
	o.mu.Unlock()
	o.changed <- struct{}{}
}

func (o *owner) Skipped(_ context.Context, jid string, id int64, cause error) {
	o.mu.Lock()
	o.skipped = append(o.skipped, jid+" "+cause.Error())
	o.mu.Unlock()
	o.changed <- struct{}{}
}

func (o *owner) wait(t *testing.T, what string, ok func(o *owner) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		o.mu.Lock()
		done := ok(o)
		o.mu.Unlock()
		if done {
			return
		}
		select {
		case <-o.changed:
		case <-deadline:
			t.Fatalf("%s never happened", what)
		}
	}
}

// run starts c.Run against s and returns a stop that waits for Run to end.
func run(t *testing.T, c *telegram.Channel, s *sink) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, s) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// inStack tells whether some goroutine is in fn right now.
func inStack(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

// waitStack waits until some goroutine is (or, with in false, none is) in fn.
func waitStack(t *testing.T, fn string, in bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); inStack(fn) != in; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a goroutine in %s: %v, want %v", fn, !in, in)
		}
	}
}

// A 429 is waited out on getMe and getUpdates as on sends: the mock
// answers 429 again to any request that comes before retry_after has
// passed, so one 429 each is proof that the channel waited.
func TestFloodControlWhilePolling(t *testing.T) {
	bot := mocktelegram.Start(t, token)
	bot.FailNext("getMe", mocktelegram.Failure{Code: 429, Description: "Too Many Requests: retry after 1", RetryAfter: 1})
	bot.FailNext("getUpdates", mocktelegram.Failure{Code: 429, Description: "Too Many Requests: retry after 2", RetryAfter: 2})
	bot.Push(map[string]any{"message": bot.Message(mocktelegram.Group(-1001, "Family"), mocktelegram.User(5, "Alice"), "after the flood", nil)})
	c := newChannel(t, bot, nil, telegram.Options{})
	s := &sink{got: make(chan struct{}, 10)}
	run(t, c, s)
	if m := s.next(t); m.Text != "after the flood" {
		t.Errorf("delivered: %+v", m)
	}
	if r := bot.Requests("getMe"); r[0].Answered != 429 || r[1].Answered != 0 {
		t.Errorf("getMe after a 429: %+v", r)
	}
	var refused []mocktelegram.Request
	polls := bot.Polls()
	for i, p := range polls {
		if p.Answered == 429 {
			refused = append(refused, p)
			if i+1 < len(polls) && polls[i+1].Time.Sub(p.Time) < 2*time.Second {
				t.Errorf("the poll after a 429 with retry_after 2 came %s later", polls[i+1].Time.Sub(p.Time))
			}
		}
	}
	if len(refused) != 1 {
		t.Errorf("getUpdates answered 429 %d times, want once (asked again before retry_after passed): %+v", len(refused), polls)
	}
}

// A 409 (another program polls the bot) stops polling: the owner is told
// once, status says why and what to do, and nothing polls until Resume —
// a Resume that meets the 409 again tells nobody again; one after the
// other program stopped polls again.
func TestConflictStopsPolling(t *testing.T) {
	bot := mocktelegram.Start(t, token)
	o := newOwner()
	c := newChannel(t, bot, nil, telegram.Options{Outbox: o})
	s := &sink{got: make(chan struct{}, 10)}
	bot.Conflict(true)
	run(t, c, s)
	o.wait(t, "the owner told", func(o *owner) bool { return len(o.told) == 1 })
	waitStack(t, "telegram.(*Channel).stop(", true) // held, not polling
	if got := o.told[0]; !strings.Contains(got, "409") || !strings.Contains(got, "stop the other program using this bot token") || !strings.Contains(got, "nanoclawd run") {
		t.Errorf("the owner was told: %s", got)
	}
	if st := c.Status(); c.Connected() || !strings.HasPrefix(st, "polling stopped since") || !strings.Contains(st, "409 Conflict") || !strings.Contains(st, "save the config file") {
		t.Errorf("status while stopped: %s", st)
	}
	conflicts := func() (n int) {
		for _, p := range bot.Polls() {
			if p.Answered == 409 {
				n++
			}
		}
		return n
	}
	if n := conflicts(); n != 1 {
		t.Errorf("%d polls met the 409 before the stop; want 1", n)
	}

	c.Resume() // still another program polling
	bot.WaitFor(t, "", 30*time.Second, func([]mocktelegram.Request) bool { return conflicts() == 2 })
	waitStack(t, "telegram.(*Channel).stop(", true)

	bot.Conflict(false)
	c.Resume()
	bot.Push(map[string]any{"message": bot.Message(mocktelegram.Group(-1001, "Family"), mocktelegram.User(5, "Alice"), "polled again", nil)})
	if m := s.next(t); m.Text != "polled again" {
		t.Errorf("after the 409 went: %+v", m)
	}
	if n := conflicts(); n != 2 {
		t.Errorf("%d polls met the 409; want 2 (one, then one per Resume)", n)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.told) != 1 {
		t.Errorf("the owner was told %d times: %q", len(o.told), o.told)
	}
	if !c.Connected() || strings.Contains(c.Status(), "stopped") {
		t.Errorf("status after polling again: %s", c.Status())
	}
}

// An update that cannot be stored — one that does not decode, one the
// sink refuses every time — is fetched maxTries times, then skipped with
// a log line and an audit record naming it; the next message arrives.
func TestPoisonUpdatesAreSkipped(t *testing.T) {
	bot := mocktelegram.Start(t, token)
	o := newOwner()
	c := newChannel(t, bot, nil, telegram.Options{Audit: o, StoreRetry: 10 * time.Millisecond})
	s := &sink{got: make(chan struct{}, 10)}
	group := mocktelegram.Group(-1001, "Family")
	alice := mocktelegram.User(5, "Alice")
	bad := bot.Push(map[string]any{"message": map[string]any{"message_id": 1, "date": "yesterday", "chat": group, "from": alice, "text": "x"}})
	run(t, c, s)
	o.wait(t, "the first skip", func(o *owner) bool { return len(o.skipped) == 1 })
	s.mu.Lock()
	s.failures = 5
	s.mu.Unlock()
	bot.Push(map[string]any{"message": bot.Message(group, alice, "poison", nil)})
	bot.Push(map[string]any{"message": bot.Message(group, alice, "next", nil)})
	if m := s.next(t); m.Text != "next" {
		t.Errorf("after the poison: %+v", m)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.skipped) != 2 || !strings.HasPrefix(o.skipped[0], "tg:-1001 update ") || !strings.Contains(o.skipped[1], "disk full") {
		t.Errorf("skipped: %q", o.skipped)
	}
	fetched := 0 // it came first, so the polls that fetched it asked from offset 0
	for _, p := range bot.Polls() {
		if p.Params["offset"] == "0" {
			fetched++
		}
	}
	if fetched != 5 {
		t.Errorf("update %d, which does not decode, was fetched %d times before it was skipped; want 5", bad, fetched)
	}
}
