package standby

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// agent is a stand-in agent: running is closed once its Run started.
type agent struct {
	group   string
	fp      string
	running chan struct{}
	ended   chan struct{} // closed once its Run returned
}

func (a *agent) Running() <-chan struct{} { return a.running }
func (a *agent) Fingerprint() string      { return a.fp }
func (a *agent) Early() bool              { return false }

// starter starts stand-in agents: each runs run (by default, until it is
// stopped or asked to finish) and is sent on started once it runs.
type starter struct {
	mu      sync.Mutex
	fp      string // what a fresh run would be started with now
	run     func(n int, ctx context.Context, closing <-chan struct{}) error
	runs    int
	started chan *agent
}

func (s *starter) New(g groups.Group) *agent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &agent{group: g.Folder, fp: s.fp, running: make(chan struct{}), ended: make(chan struct{})}
}

func (s *starter) Run(ctx context.Context, a *agent, closing <-chan struct{}) error {
	defer close(a.ended)
	s.mu.Lock()
	s.runs++
	n, run := s.runs, s.run
	s.mu.Unlock()
	close(a.running)
	s.started <- a
	if run != nil {
		return run(n, ctx, closing)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-closing:
		return nil
	}
}

func (s *starter) Fingerprint(context.Context, groups.Group) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fp, nil
}

func (s *starter) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.runs
}

type registry struct{}

func (registry) ByJID(_ context.Context, jid string) (groups.Group, error) {
	folder, _, _ := strings.Cut(jid, "@")
	return groups.Group{Folder: folder, JID: jid}, nil
}

func (registry) ByFolder(_ context.Context, folder string) (groups.Group, error) {
	return groups.Group{Folder: folder, JID: folder + "@g.us"}, nil
}

// chats says family was active last.
type chats struct{}

func (chats) RecentGroupChats(context.Context, int) ([]string, error) {
	return []string{"family@g.us"}, nil
}

// world is a pool of stand-in agents for family, warmed up, with its log.
type world struct {
	p    *Pool[*agent]
	s    *starter
	cfg  *config.Config
	log  *syncBuffer
	stop context.CancelFunc // the daemon stops
}

func newWorld(t *testing.T, warmFor time.Duration, run func(n int, ctx context.Context, closing <-chan struct{}) error) *world {
	t.Helper()
	cfg := &config.Config{}
	cfg.Agent.Warm, cfg.Agent.WarmFor, cfg.Agent.Command = 1, config.Duration(warmFor), []string{"agent", "--wait"}
	w := &world{s: &starter{fp: "v1", run: run, started: make(chan *agent, 4)}, cfg: cfg, log: &syncBuffer{}}
	w.p = New[*agent](w.s, registry{}, chats{}, func() *config.Config { return cfg }, zerolog.New(w.log))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w.stop = cancel
	w.p.WarmUp(ctx)
	return w
}

// next waits for the next agent started.
func (w *world) next(t *testing.T) *agent {
	t.Helper()
	select {
	case a := <-w.s.started:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("no agent was started ahead")
		return nil
	}
}

// A standby is handed over only while it was started with what a fresh
// run would get: a stale one is stopped, and gone, before Take returns.
func TestTakeHandsOverOnlyAFreshStandby(t *testing.T) {
	w := newWorld(t, time.Hour, nil)
	family := groups.Group{Folder: "family", JID: "family@g.us"}
	a := w.next(t)
	if st := w.p.Status(); len(st) != 1 || st["family"].IsZero() {
		t.Fatalf("status = %v, want family's standby", st)
	}
	sb := w.p.Take(context.Background(), family)
	if sb == nil || sb.Agent != a {
		t.Fatalf("took %v, want the agent started ahead", sb)
	}
	sb.Close()
	if err := sb.Wait(); err != nil {
		t.Errorf("the taken agent ended with %v", err)
	}

	w.p.Touch("family") // its run is done: the group gets another
	stale := w.next(t)
	w.s.mu.Lock()
	w.s.fp = "v2" // the group's policy changed
	w.s.mu.Unlock()
	if sb := w.p.Take(context.Background(), family); sb != nil {
		t.Fatalf("took a standby started with another policy")
	}
	select {
	case <-stale.ended:
	default:
		t.Error("Take returned before the stale standby was gone")
	}
	if !strings.Contains(w.log.String(), "started with another policy or session") {
		t.Errorf("log = %s", w.log)
	}
}

// A command that exits before it is given a prompt is said once in the
// log and not started ahead again.
func TestCommandThatDoesNotWaitIsNotKeptWarm(t *testing.T) {
	w := newWorld(t, time.Hour, func(int, context.Context, <-chan struct{}) error { return nil })
	<-w.next(t).ended
	waitUntil(t, func() bool {
		w.p.mu.Lock()
		defer w.p.mu.Unlock()
		return w.p.unfit == commandKey(w.cfg)
	})
	w.p.Ensure("family")
	if n := w.s.count(); n != 1 {
		t.Errorf("%d agents started for a command that does not wait, want 1", n)
	}
	if got := w.log.String(); strings.Count(got, "agents are not started ahead for it") != 1 {
		t.Errorf("log = %s", got)
	}
}

// A standby that crashes is started again after its backoff.
func TestCrashedStandbyRestarts(t *testing.T) {
	w := newWorld(t, time.Hour, func(n int, ctx context.Context, _ <-chan struct{}) error {
		if n == 1 {
			return errors.New("killed")
		}
		<-ctx.Done()
		return ctx.Err()
	})
	w.next(t)
	w.next(t)
	if got := w.log.String(); !strings.Contains(got, `"in_a_row":1`) || !strings.Contains(got, "starting another") {
		t.Errorf("log = %s", got)
	}
}

// A standby that waited agent.warmFor is stopped, and its group is not
// given another until it is active again.
func TestStandbyExpires(t *testing.T) {
	w := newWorld(t, 50*time.Millisecond, nil)
	<-w.next(t).ended
	waitUntil(t, func() bool {
		w.p.mu.Lock()
		defer w.p.mu.Unlock()
		return len(w.p.stopping) == 0
	})
	w.p.Ensure("family")
	if n, st := w.s.count(), w.p.Status(); n != 1 || len(st) != 0 {
		t.Errorf("after it expired: %d agents started, status %v; want 1 and none", n, st)
	}
	if !strings.Contains(w.log.String(), "waited agent.warmFor for a message") {
		t.Errorf("log = %s", w.log)
	}
	w.p.Touch("family") // a message
	w.next(t)
}

// When the daemon stops (WarmUp's ctx ends), a standby waiting for its
// prompt is stopped and none starts again; a taken one is its run's and
// goes on until the run asks it to finish. Wait returns once every
// standby's Run has returned, the taken one's too.
func TestStopEndsWaitingStandbysAndWaitCoversAll(t *testing.T) {
	w := newWorld(t, time.Hour, nil)
	family := groups.Group{Folder: "family", JID: "family@g.us"}
	w.next(t)
	taken := w.p.Take(context.Background(), family)
	if taken == nil {
		t.Fatal("no standby to take")
	}
	w.p.Touch("family") // the pool alone does not know the run goes on
	waiting := w.next(t)

	w.stop()
	select {
	case <-waiting.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting standby was not stopped when the daemon stopped")
	}
	waited := make(chan struct{})
	go func() { w.p.Wait(); close(waited) }()
	select {
	case <-taken.Agent.ended:
		t.Fatal("the taken standby was stopped with the pool, not by its run")
	case <-waited:
		t.Fatal("Wait returned while the taken standby still ran")
	default:
	}
	w.p.Ensure("family")
	if n := w.s.count(); n != 2 {
		t.Errorf("%d agents started, want 2: none after the stop", n)
	}
	taken.Close()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return once every standby ended")
	}
}

func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// syncBuffer is a log the pool's goroutines write to while a test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
