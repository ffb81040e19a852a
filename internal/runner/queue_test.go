package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const wait = 5 * time.Second

func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// started describes a job as "folder" or "folder:task".
func started(j Job) string {
	if j.TaskID != "" {
		return j.Folder + ":" + j.TaskID
	}
	return j.Folder
}

// gate's run, as a testQueue's Worker.Run, waits for one token on release.
type gate struct {
	starts  chan string
	release chan struct{}
}

func newGate() *gate { return &gate{starts: make(chan string, 100), release: make(chan struct{})} }

func (g *gate) run(ctx context.Context, j Job) error {
	g.starts <- started(j)
	<-g.release
	return nil
}

func TestQueueMaxConcurrent(t *testing.T) {
	var cur, peak atomic.Int32
	release := make(chan struct{})
	in := make(chan struct{}, 10)
	done := make(chan string, 10)
	q := newTestQueue(2, func(ctx context.Context, j Job) error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		in <- struct{}{}
		<-release
		cur.Add(-1)
		done <- j.Folder
		return nil
	})
	for i := range 6 {
		q.EnqueueMessages(fmt.Sprintf("g%d", i))
	}
	recv(t, in, "a run")
	recv(t, in, "a second run")
	close(release)
	var got []string
	for range 6 {
		got = append(got, recv(t, done, "a run to end"))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"g0", "g1", "g2", "g3", "g4", "g5"}) {
		t.Fatalf("runs %q", got)
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2", p)
	}
}

// Messages for a running group go to its run (More) and cause exactly one
// more run after it; the group never has two runs at once.
func TestQueueOnePerGroupAndFollowUps(t *testing.T) {
	var cur, peak, runs atomic.Int32
	firstIn := make(chan Job, 1)
	release := make(chan struct{})
	ended := make(chan struct{}, 10)
	q := newTestQueue(4, func(ctx context.Context, j Job) error {
		if n := cur.Add(1); n > peak.Load() {
			peak.Store(n)
		}
		if runs.Add(1) == 1 {
			firstIn <- j
			<-release
		}
		cur.Add(-1)
		ended <- struct{}{}
		return nil
	})
	q.EnqueueMessages("a")
	j := recv(t, firstIn, "the first run")
	for range 3 {
		q.EnqueueMessages("a")
	}
	recv(t, j.More, "a follow-up signal")
	close(release)
	recv(t, ended, "the first run to end")
	recv(t, ended, "the run for messages that came during the first")
	// The run signals its end just before the queue counts it ended.
	idle := false
	for deadline := time.Now().Add(wait); !idle && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		q.mu.Lock()
		idle = q.running == 0 && len(q.waiting) == 0
		q.mu.Unlock()
	}
	if !idle || runs.Load() != 2 || peak.Load() != 1 {
		t.Fatalf("runs %d, peak %d, idle %v", runs.Load(), peak.Load(), idle)
	}
}

// Groups take turns in arrival order; a group that got new messages while it
// ran goes to the back of the line.
func TestQueueFIFOAcrossGroups(t *testing.T) {
	g := newGate()
	q := newTestQueue(1, g.run)
	q.EnqueueMessages("a")
	recv(t, g.starts, "a")
	for _, f := range []string{"b", "c", "d", "a", "e", "c"} {
		q.EnqueueMessages(f)
	}
	var order []string
	for range 5 {
		g.release <- struct{}{}
		order = append(order, recv(t, g.starts, "the next run"))
	}
	g.release <- struct{}{}
	if want := []string{"b", "c", "d", "e", "a"}; !slices.Equal(order, want) {
		t.Fatalf("order %q, want %q", order, want)
	}
}

func TestQueueTasksFirst(t *testing.T) {
	g := newGate()
	q := newTestQueue(1, g.run)
	q.EnqueueMessages("x")
	recv(t, g.starts, "x")
	q.EnqueueMessages("b")
	q.EnqueueMessages("c")
	q.EnqueueTask("d", "t1")
	q.EnqueueTask("c", "t2")
	q.EnqueueTask("c", "t2") // already due: not twice
	var order []string
	for range 4 {
		g.release <- struct{}{}
		order = append(order, recv(t, g.starts, "the next run"))
	}
	g.release <- struct{}{}
	// c is ahead of d in line, and both have a task; c's messages wait for its task.
	if want := []string{"c:t2", "d:t1", "b", "c"}; !slices.Equal(order, want) {
		t.Fatalf("order %q, want %q", order, want)
	}
}

// A running agent is asked to finish when a task for its group is due, and
// when another group waits for the only slot.
func TestQueueClosingWhenOthersWait(t *testing.T) {
	starts := make(chan Job, 10)
	q := newTestQueue(1, func(ctx context.Context, j Job) error {
		starts <- j
		<-j.Closing // an idle agent: ends when asked
		return nil
	})
	q.EnqueueMessages("a")
	j := recv(t, starts, "a")
	q.EnqueueTask("a", "t")
	recv(t, j.Closing, "a asked to finish for its task")
	if j = recv(t, starts, "the task"); started(j) != "a:t" {
		t.Fatalf("started %s", started(j))
	}
	q.EnqueueMessages("b")
	recv(t, j.Closing, "the task asked to finish for b")
	if j = recv(t, starts, "b"); started(j) != "b" {
		t.Fatalf("started %s", started(j))
	}
	if err := q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestQueueRetryBackoffThenGiveUp(t *testing.T) {
	boom := errors.New("boom")
	var mu sync.Mutex
	var attempts []int
	var times []time.Time
	gaveUp := make(chan error, 2)
	q := newTestQueue(1, func(ctx context.Context, j Job) error {
		mu.Lock()
		attempts = append(attempts, j.Attempt)
		times = append(times, time.Now())
		mu.Unlock()
		return boom
	})
	q.RetryBase = 5 * time.Millisecond
	q.OnGiveUp = func(j Job, err error) {
		if j.Folder != "a" || j.TaskID != "" {
			t.Errorf("gave up on %+v", j)
		}
		gaveUp <- err
	}
	q.EnqueueMessages("a")
	if err := recv(t, gaveUp, "giving up"); !errors.Is(err, boom) {
		t.Fatalf("reported %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(attempts, []int{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("attempts %v", attempts)
	}
	for i := 1; i < len(times); i++ {
		if min := q.RetryBase << (i - 1); times[i].Sub(times[i-1]) < min {
			t.Fatalf("retry %d came %s after the last try, before its backoff %s", i, times[i].Sub(times[i-1]), min)
		}
	}
}

func TestQueueRetrySucceeds(t *testing.T) {
	var calls atomic.Int32
	done := make(chan Job, 1)
	q := newTestQueue(1, func(ctx context.Context, j Job) error {
		if calls.Add(1) <= 2 {
			return errors.New("transient")
		}
		done <- j
		return nil
	})
	q.RetryBase = time.Millisecond
	q.OnGiveUp = func(j Job, err error) { t.Errorf("gave up: %v", err) }
	q.EnqueueMessages("a")
	if j := recv(t, done, "the third try"); j.Attempt != 2 {
		t.Fatalf("attempt %d", j.Attempt)
	}
	// The run sent on done before returning: wait until the queue has
	// booked its end before looking.
	deadline := time.Now().Add(10 * time.Second)
	var retries int
	for {
		q.mu.Lock()
		g := q.groups["a"]
		booked := g.active == nil
		retries = g.retries
		q.mu.Unlock()
		if booked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never ended")
		}
		time.Sleep(time.Millisecond)
	}
	if err := q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if retries != 0 {
		t.Fatalf("retry count not reset: %d", retries)
	}
}

func TestQueueNoRetry(t *testing.T) {
	var calls atomic.Int32
	reported := make(chan error, 1)
	q := newTestQueue(1, func(ctx context.Context, j Job) error {
		calls.Add(1)
		return NoRetry(fmt.Errorf("agent for a: %w", ErrTimeout))
	})
	q.RetryBase = time.Millisecond
	q.OnGiveUp = func(j Job, err error) { reported <- err }
	q.EnqueueMessages("a")
	if err := recv(t, reported, "the report"); !errors.Is(err, ErrTimeout) {
		t.Fatalf("reported %v", err)
	}
	if err := q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
}

// A failed task is reported at once and not run again; a panicking run is a
// failure, not a crash.
func TestQueueTaskFailureAndPanic(t *testing.T) {
	var calls atomic.Int32
	reported := make(chan string, 2)
	q := newTestQueue(1, func(ctx context.Context, j Job) error {
		calls.Add(1)
		if j.TaskID == "" {
			panic("bug")
		}
		return errors.New("task failed")
	})
	q.Retries = 0
	q.OnGiveUp = func(j Job, err error) { reported <- started(j) + ": " + err.Error() }
	q.EnqueueTask("a", "t")
	if got := recv(t, reported, "the task failure"); got != "a:t: task failed" {
		t.Fatalf("reported %q", got)
	}
	q.EnqueueMessages("a")
	if got := recv(t, reported, "the panic"); got != "a: run of a panicked: bug" {
		t.Fatalf("reported %q", got)
	}
	if err := q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls", n)
	}
}

// Shutdown asks runs to finish, kills (cancels) those that don't by the
// deadline, and takes no more work.
func TestQueueShutdown(t *testing.T) {
	var calls atomic.Int32
	both := make(chan struct{}, 2)
	obedient := make(chan struct{})
	q := newTestQueue(2, func(ctx context.Context, j Job) error {
		calls.Add(1)
		both <- struct{}{}
		if j.Folder == "good" {
			<-j.Closing
			close(obedient)
			return nil
		}
		<-ctx.Done() // a hung agent: only the kill ends it
		return ctx.Err()
	})
	q.OnGiveUp = func(j Job, err error) { t.Errorf("shutdown reported as failure: %v", err) }
	q.EnqueueMessages("good")
	q.EnqueueMessages("hung")
	recv(t, both, "a run")
	recv(t, both, "another run")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := q.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown: %v", err)
	}
	recv(t, obedient, "the obedient run to see Closing")
	q.EnqueueMessages("late")
	q.EnqueueTask("late", "t")
	q.mu.Lock()
	idle := q.running == 0 && len(q.waiting) == 0
	q.mu.Unlock()
	if !idle || calls.Load() != 2 {
		t.Fatalf("after shutdown: idle %v, calls %d", idle, calls.Load())
	}
}

// Shutdown during a retry's backoff: the retry never runs.
func TestQueueShutdownStopsBackoff(t *testing.T) {
	var calls atomic.Int32
	failed := make(chan struct{}, 1)
	q := newTestQueue(1, func(ctx context.Context, j Job) error {
		calls.Add(1)
		failed <- struct{}{}
		return errors.New("x")
	})
	q.RetryBase = time.Hour
	q.EnqueueMessages("a")
	recv(t, failed, "the failing run")
	if err := q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	pending := q.groups["a"].backoff
	q.mu.Unlock()
	if pending != nil || calls.Load() != 1 {
		t.Fatalf("backoff %v, calls %d", pending, calls.Load())
	}
}

// No message is lost in the race between a run ending and a message
// arriving: every message stored is seen by a run that started after it was
// stored. Messages come from several goroutines at once, runs are short.
func TestQueueNoLostMessages(t *testing.T) {
	const groups, perGroup = 4, 300
	var stored [groups]atomic.Int64
	var seen [groups]atomic.Int64
	allSeen := make(chan struct{})
	var left atomic.Int32
	left.Store(groups)
	q := newTestQueue(2, func(ctx context.Context, j Job) error {
		var i int
		fmt.Sscanf(j.Folder, "g%d", &i)
		n := stored[i].Load() // "read the unanswered messages"
		if seen[i].Swap(n) < perGroup && n == perGroup && left.Add(-1) == 0 {
			close(allSeen)
		}
		return nil
	})
	var wg sync.WaitGroup
	for i := range groups {
		for range 3 {
			wg.Go(func() {
				for range perGroup / 3 {
					stored[i].Add(1) // "store the message", then tell the queue
					q.EnqueueMessages(fmt.Sprintf("g%d", i))
				}
			})
		}
	}
	wg.Wait()
	recv(t, allSeen, "every message to be seen by a run")
	if err := q.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkEnqueueToStart measures EnqueueMessages → Worker.Run called, the
// queue's share of "message in → agent starting".
func BenchmarkEnqueueToStart(b *testing.B) {
	var t0 atomic.Int64
	startedAt := make(chan time.Duration, 1)
	q := newTestQueue(4, func(ctx context.Context, j Job) error {
		startedAt <- time.Duration(time.Now().UnixNano() - t0.Load())
		return nil
	})
	defer q.Shutdown(context.Background())
	lat := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		t0.Store(time.Now().UnixNano())
		q.EnqueueMessages(fmt.Sprintf("g%d", i%8))
		lat = append(lat, <-startedAt)
		i++
	}
	reportPercentiles(b, lat)
}

// Other groups never hold every slot: the main group starts at once while
// they hold the rest, and one of them waits.
func TestQueueKeepsASlotForMain(t *testing.T) {
	g := newGate()
	q := newTestQueue(3, g.run)
	q.reserved = func(folder string) bool { return folder == "main" }
	for _, f := range []string{"a", "b", "c"} {
		q.EnqueueMessages(f)
	}
	first := []string{recv(t, g.starts, "a run"), recv(t, g.starts, "a second run")}
	select {
	case s := <-g.starts:
		t.Fatalf("%s took the slot kept for main (already running %v)", s, first)
	default:
	}
	q.EnqueueMessages("main")
	if s := recv(t, g.starts, "main's run"); s != "main" {
		t.Fatalf("started %s, want main", s)
	}
	close(g.release)
	if s := recv(t, g.starts, "the third group's run"); s != "c" && s != "a" && s != "b" {
		t.Fatalf("started %s", s)
	}
}

// testQueue is a Queue whose worker calls run and OnGiveUp (if set).
type testQueue struct {
	*Queue
	run      func(ctx context.Context, j Job) error
	OnGiveUp func(j Job, err error)
}

func newTestQueue(max int, run func(ctx context.Context, j Job) error) *testQueue {
	q := &testQueue{Queue: NewQueue(max, nil), run: run}
	q.Start(q)
	return q
}

func (q *testQueue) Run(ctx context.Context, j Job) error { return q.run(ctx, j) }

func (q *testQueue) GiveUp(j Job, err error) {
	if q.OnGiveUp != nil {
		q.OnGiveUp(j, err)
	}
}

// The reserved-slot check may be slow (it reads SQLite, up to its busy
// timeout): it runs outside the queue's lock, so other groups' enqueues,
// Running and Snapshot (status) do not wait behind it.
func TestQueueReservedCheckOutsideTheLock(t *testing.T) {
	g := newGate()
	defer close(g.release)
	q := newTestQueue(2, g.run)
	entered, unblock := make(chan struct{}), make(chan struct{})
	var once sync.Once
	q.reserved = func(folder string) bool {
		if folder == "slow" {
			once.Do(func() { close(entered) })
			<-unblock
		}
		return folder == "main"
	}
	go q.EnqueueMessages("slow")
	recv(t, entered, "the reserved check")
	done := make(chan struct{})
	go func() {
		q.Running("other")
		q.Snapshot()
		q.EnqueueMessages("main")
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
		close(unblock)
		t.Fatal("the queue's lock was held while the reserved check ran")
	}
	close(unblock)
	recv(t, g.starts, "a run")
	recv(t, g.starts, "a second run")
}
