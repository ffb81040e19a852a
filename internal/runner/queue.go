package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Job is one run the Queue hands to its Worker.
type Job struct {
	Folder  string
	TaskID  string // the scheduled task to run; "" for a message run
	Attempt int    // 0 for the first try of a message run, n for its nth retry

	// More (message runs only) receives, coalesced, when new messages arrived
	// for the group while this run is going: the Worker delivers them to
	// its agent as follow-ups (FollowUp). Missing a signal loses nothing:
	// a message that arrived during a run always causes one more run after it.
	More <-chan struct{}

	// Closing is closed when the queue wants this run to finish soon — a
	// task waits for the group, another group waits for a slot, or the queue
	// shuts down. Pass it as Spec.Closing.
	Closing <-chan struct{}
}

// NoRetry marks a run's error as one a retry cannot fix (say, an agent
// that hung until its hard timeout): the queue reports it through OnGiveUp at
// once instead of retrying.
func NoRetry(err error) error { return noRetry{err} }

type noRetry struct{ error }

func (e noRetry) Unwrap() error { return e.error }

// Worker does the queue's jobs.
type Worker interface {
	// Run does one job. For a message run it reads the group's unanswered
	// messages itself (and returns nil at once when there are none: runs
	// are coalesced, so it is called after every burst of
	// EnqueueMessages). A non-nil error from a message run is retried with
	// backoff, unless wrapped with NoRetry.
	Run(ctx context.Context, job Job) error
	// GiveUp is told that a message run failed 1+Retries times (or once,
	// with NoRetry), or that a task run failed.
	GiveUp(job Job, err error)
}

// Queue runs jobs with at most one agent per group and a fixed number
// overall. Groups wait in one FIFO line and rejoin at its end after a run, so
// a busy group cannot starve the others; a group with a scheduled task due
// goes before groups with only messages, and within a group tasks go first.
// It has no goroutine of its own: enqueueing, a run ending and a backoff
// timer firing are what move it.
type Queue struct {
	// Settable before Start; NewQueue fills in the defaults.
	RetryBase time.Duration // first retry delay, doubled each time (5 s)
	Retries   int           // retries of a failing message run before giving up (5)

	reserved func(folder string) bool
	worker   Worker // nil until Start: jobs wait
	max      int
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu        sync.Mutex
	groups    map[string]*groupState
	waiting   []*groupState // FIFO of groups that can start now
	running   int
	nReserved int // running agents of reserved groups
	closed    bool
}

type groupState struct {
	folder   string
	reserved bool     // may use the slot kept for the reserved group
	messages bool     // a message run is due
	tasks    []string // due task ids, in order
	active   *activeRun
	retries  int         // failed message runs in a row
	backoff  *time.Timer // set while a message retry waits
	queued   bool        // in Queue.waiting
}

type activeRun struct {
	job      Job
	started  time.Time
	more     chan struct{}
	closing  chan struct{}
	closed   bool
	reserved bool // holds the slot kept for the reserved group
}

// NewQueue returns a queue that runs at most maxConcurrent jobs at a time
// (at least 1), once Start gave it its worker. reserved, if not nil, names
// the group (the main group) for which one slot is always kept: other
// groups share the rest, so the owner is never stuck behind them.
func NewQueue(maxConcurrent int, reserved func(folder string) bool) *Queue {
	ctx, cancel := context.WithCancel(context.Background())
	return &Queue{
		RetryBase: 5 * time.Second,
		Retries:   5,
		reserved:  reserved,
		max:       max(maxConcurrent, 1),
		ctx:       ctx,
		cancel:    cancel,
		groups:    map[string]*groupState{},
	}
}

// Start hands the queue its worker and starts what was enqueued before.
// The queue is built before the worker (which enqueues into it), so it is
// given the worker once both exist.
func (q *Queue) Start(w Worker) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.worker = w
	q.pump()
}

// Running tells whether a message run of folder is going.
func (q *Queue) Running(folder string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.groups[folder]
	return g != nil && g.active != nil && g.active.job.TaskID == ""
}

// EnqueueMessages says the group has new messages. If its message run is
// going, the run's Job.More fires; either way a run follows.
// After Shutdown it does nothing (the messages stay unanswered in SQLite).
func (q *Queue) EnqueueMessages(folder string) {
	reserved := q.isReserved(folder)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	g := q.group(folder)
	g.reserved = reserved
	g.messages = true
	if a := g.active; a != nil && a.more != nil {
		select {
		case a.more <- struct{}{}:
		default:
		}
	}
	q.schedule(g)
	q.pump()
}

// EnqueueTask says a scheduled task of the group is due. A task already
// waiting or running is not queued twice. A running agent of the group is
// asked to finish so the task can start.
func (q *Queue) EnqueueTask(folder, taskID string) {
	reserved := q.isReserved(folder)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	g := q.group(folder)
	g.reserved = reserved
	if slices.Contains(g.tasks, taskID) || (g.active != nil && g.active.job.TaskID == taskID) {
		return
	}
	g.tasks = append(g.tasks, taskID)
	if g.active != nil {
		g.active.close()
	}
	q.schedule(g)
	q.pump()
}

// Shutdown stops taking work, asks running agents to finish (Job.Closing)
// and waits for them until ctx is done; then it cancels their contexts,
// which kills them (SIGTERM, SIGKILL after the runner's grace), and waits
// for that. It returns ctx's error if anything had to be killed.
func (q *Queue) Shutdown(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		q.waiting = nil
		for _, g := range q.groups {
			if g.backoff != nil {
				g.backoff.Stop()
				g.backoff = nil
			}
			if g.active != nil {
				g.active.close()
			}
		}
	}
	q.mu.Unlock()

	done := make(chan struct{})
	go func() {
		q.wg.Wait()
		close(done)
	}()
	defer q.cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	q.cancel()
	<-done
	return fmt.Errorf("queue shutdown: agents still running at the deadline were killed: %w", ctx.Err())
}

// isReserved asks whether folder is the reserved group. It is called
// without q.mu: the answer may come from SQLite, which can take up to its
// busy timeout, and nothing else may wait for the queue that long.
func (q *Queue) isReserved(folder string) bool {
	return q.reserved != nil && q.reserved(folder)
}

func (q *Queue) group(folder string) *groupState {
	g := q.groups[folder]
	if g == nil {
		g = &groupState{folder: folder}
		q.groups[folder] = g
	}
	return g
}

// schedule puts g in line if it has work it may start now.
func (q *Queue) schedule(g *groupState) {
	if q.closed || g.queued || g.active != nil {
		return
	}
	if len(g.tasks) > 0 || (g.messages && g.backoff == nil) {
		g.queued = true
		q.waiting = append(q.waiting, g)
	}
}

// pump starts what the free slots allow, and asks running agents to finish
// when groups are left waiting, so an idle agent does not hold a slot.
func (q *Queue) pump() {
	for !q.closed && q.worker != nil && q.running < q.max && len(q.waiting) > 0 {
		i := slices.IndexFunc(q.waiting, func(g *groupState) bool { return len(g.tasks) > 0 && q.mayStart(g) })
		if i < 0 {
			i = slices.IndexFunc(q.waiting, q.mayStart)
		}
		if i < 0 {
			break
		}
		g := q.waiting[i]
		q.waiting = slices.Delete(q.waiting, i, i+1)
		g.queued = false
		q.start(g)
	}
	if len(q.waiting) > 0 {
		for _, g := range q.groups {
			if g.active != nil {
				g.active.close()
			}
		}
	}
}

// mayStart tells whether g may take a free slot: a group that is not
// reserved may not take the last one while the reserved group has none.
func (q *Queue) mayStart(g *groupState) bool {
	if q.reserved == nil || q.max == 1 || g.reserved {
		return true
	}
	return q.running-q.nReserved < q.max-1
}

func (q *Queue) start(g *groupState) {
	a := &activeRun{closing: make(chan struct{}), started: time.Now()}
	a.job = Job{Folder: g.folder, Closing: a.closing}
	if len(g.tasks) > 0 {
		a.job.TaskID = g.tasks[0]
		g.tasks = g.tasks[1:]
	} else {
		g.messages = false // this run reads everything pending
		a.more = make(chan struct{}, 1)
		a.job.More = a.more
		a.job.Attempt = g.retries
	}
	g.active = a
	q.running++
	if a.reserved = g.reserved; a.reserved {
		q.nReserved++
	}
	q.wg.Add(1)
	go q.exec(g, a)
}

func (q *Queue) exec(g *groupState, a *activeRun) {
	defer q.wg.Done()
	err := q.call(a.job)

	q.mu.Lock()
	g.active = nil
	q.running--
	if a.reserved {
		q.nReserved--
	}
	giveUp := false
	switch {
	case q.closed:
		// Shutting down: no retries, and a killed run is not the agent's failure.
	case a.job.TaskID != "":
		// Tasks are not retried: the run may have acted already, and the
		// scheduler records the failure and runs the task again when due.
		giveUp = err != nil
	case err == nil:
		g.retries = 0
	case errors.As(err, new(noRetry)):
		giveUp = true
		g.retries = 0
	default:
		g.retries++
		if g.retries > q.Retries {
			giveUp = true
			g.retries = 0
			break
		}
		g.messages = true
		g.backoff = time.AfterFunc(q.RetryBase<<(g.retries-1), func() { q.retryDue(g) })
	}
	q.schedule(g)
	q.pump()
	q.mu.Unlock()

	if giveUp {
		q.worker.GiveUp(a.job, err)
	}
}

// call runs the job, turning a panic into an error so the queue's books stay right.
func (q *Queue) call(job Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("run of %s panicked: %v", job.Folder, p)
		}
	}()
	return q.worker.Run(q.ctx, job)
}

func (q *Queue) retryDue(g *groupState) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if g.backoff == nil { // stopped by Shutdown
		return
	}
	g.backoff = nil
	q.schedule(g)
	q.pump()
}

func (a *activeRun) close() {
	if !a.closed {
		a.closed = true
		close(a.closing)
	}
}
