package router

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/metrics"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

func TestMain(m *testing.M) { e2e.Main(m) }

// The session-retry path: the first agent finds its saved session gone
// and a second one starts fresh for the same messages. A message that
// came while the first agent ran was handed to it as a follow-up; the
// runner empties input/ before the second start. The follow-up must not
// be lost with it: it is answered by the second agent, or stays
// unanswered — never counted answered by a reply that did not see it.
// (Run with -race: follow reads the run's start signal while the retry
// replaces it.)
func TestSessionRetryKeepsAFollowUp(t *testing.T) {
	e := newEnv(t)
	e.cfg.Agent.Command = []string{e2e.Testagent(t)}
	e.cfg.Agent.Timeout = config.Duration(time.Minute)
	e.cfg.Agent.IdleTimeout = config.Duration(300 * time.Millisecond)
	e.r.Tokens = &mock.Tokens{
		IssueFn:  func(context.Context, string) (string, error) { return "token", nil },
		FinishFn: func(context.Context, string) error { return nil },
	}
	e.r.Ledger = runner.NewLedger(e.db)
	ctx := context.Background()
	if _, err := e.msgs.SaveSession(ctx, "main", "gone-1", time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	e.post(mainJID, alice, "1", "converse")
	more := make(chan struct{}, 1)
	input := layout.IPCDir(string(e.cfg.Layout().IPC("main"))).Input()
	exits := 0
	testHookAgentExited = func(a *agentRun) {
		if exits++; exits > 1 {
			return
		}
		// The first agent is gone; the follow-up was written while it ran
		// (as if the message came the moment before its output ended).
		a.mu.Lock()
		a.ended = false
		a.mu.Unlock()
		e.post(mainJID, alice, "2", "converse later")
		more <- struct{}{}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			ents, _ := os.ReadDir(input)
			if len(ents) > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Error("no follow-up was written")
				return
			}
		}
	}
	t.Cleanup(func() { testHookAgentExited = nil })

	if err := e.r.Run(ctx, runner.Job{Folder: "main", More: more, Closing: make(chan struct{})}); err != nil {
		t.Fatal(err)
	}
	if exits != 2 {
		t.Fatalf("%d agents ran, want the first and its retry", exits)
	}
	replies := strings.Join(e.queued(mainJID), "\n")
	for _, text := range []string{"converse", "converse later"} {
		if !strings.Contains(replies, ">"+text+"<") && !slices.Contains(e.unanswered(mainJID), text) {
			t.Errorf("%q was counted answered by replies that never saw it:\n%s", text, replies)
		}
	}
}

// startLog records what Metrics is told of agent starts.
type startLog struct {
	mu     sync.Mutex
	starts []string
}

func (l *startLog) RunDone(time.Duration) {}
func (l *startLog) AgentStarted(start string, _ time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts = append(l.starts, start)
}

// A message that comes after the agent's output ended, before its exit is
// seen (a quick reply to its answer), is written to input/ for nobody no
// more, nor counted as a follow-up start: it stays unanswered for the next
// run, which the queue starts for it.
func TestNoFollowUpOnceTheOutputEnded(t *testing.T) {
	e := newEnv(t)
	e.cfg.Agent.Command = []string{e2e.Testagent(t)}
	e.cfg.Agent.Timeout = config.Duration(time.Minute)
	e.r.Tokens = &mock.Tokens{
		IssueFn:  func(context.Context, string) (string, error) { return "token", nil },
		FinishFn: func(context.Context, string) error { return nil },
	}
	e.r.Ledger = runner.NewLedger(e.db)
	starts := &startLog{}
	e.r.Metrics = starts
	ctx := context.Background()
	e.post(mainJID, alice, "1", "first")
	more := make(chan struct{}, 1)
	input := layout.IPCDir(string(e.cfg.Layout().IPC("main"))).Input()
	testHookAgentExited = func(a *agentRun) {
		e.post(mainJID, alice, "2", "quick reply")
		more <- struct{}{}
		// follow has seen it once this is drained, and had its chance.
		for deadline := time.Now().Add(10 * time.Second); len(more) > 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Error("follow never took the new message's signal")
				return
			}
		}
	}
	t.Cleanup(func() { testHookAgentExited = nil })
	if err := e.r.Run(ctx, runner.Job{Folder: "main", More: more, Closing: make(chan struct{})}); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(input); len(ents) > 0 {
		t.Errorf("written to input/ after the agent's output ended: %v", ents)
	}
	if !slices.Contains(e.unanswered(mainJID), "quick reply") {
		t.Errorf("the quick reply is not left for the next run: unanswered %v", e.unanswered(mainJID))
	}
	starts.mu.Lock()
	defer starts.mu.Unlock()
	if !slices.Equal(starts.starts, []string{metrics.StartCold}) {
		t.Errorf("starts told %v, want the one cold start", starts.starts)
	}
}
