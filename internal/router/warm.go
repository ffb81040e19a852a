package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Warm agents: for the agent.warm most recently active groups the router
// keeps an agent started ahead — booted (node and the SDK's CLI take
// seconds), confined, holding the group's policy and session — waiting
// for its first prompt. A message for such a group is written to the
// waiting agent instead of starting one. A standby counts against
// agent.maxConcurrent only once it has work (it runs inside the queue's
// job then), and it is used only if what it was started with is still
// what a fresh run would get; otherwise it is stopped and a fresh one
// starts. A standby is not under agent.idleTimeout (it writes nothing
// while it waits) but waits up to agent.warmFor; one that ends for any
// other reason is started again (standbys.go).

// standby is one agent waiting for its first prompt.
type standby struct {
	run     *agentRun
	cancel  context.CancelFunc
	closing chan struct{} // closed: the agent is asked to finish (_close)
	done    chan error    // the run's end, for the one who adopted it
	ended   chan struct{} // closed once the agent process is gone
	since   time.Time     // when it was started (status shows its age)
	command string        // the agent.command it runs (commandKey)

	// Under warm.mu.
	taken   bool // handed to a run
	stopped bool // told to stop (stale, expired, dropped, out of the most recent)
	expired bool // waited agent.warmFor for a prompt
}

type warm struct {
	mu      sync.Mutex
	ctx     context.Context // the daemon's; ends every standby
	recent  []string        // folders, most recently active first
	waiting map[string]*standby
	// stopping holds standbys told to stop whose process may still run.
	// A group's next run waits for its own to be gone: a standby takes the
	// first file in the group's input/ as its prompt, so one still alive
	// could take, and answer, a follow-up meant for the run.
	stopping map[string]*standby
	busy     map[string]int         // groups with a run going (Router.Run): no standby for them
	crashes  map[string]int         // standbys of a group that ended on their own, in a row
	retry    map[string]*time.Timer // a standby's restart waiting for its backoff
	unfit    string                 // an agent.command that answers or exits before its prompt
}

func (w *warm) init() {
	if w.waiting == nil {
		w.waiting, w.stopping = map[string]*standby{}, map[string]*standby{}
		w.busy, w.crashes, w.retry = map[string]int{}, map[string]int{}, map[string]*time.Timer{}
	}
}

// WarmUp starts standbys for the agent.warm most recently active groups,
// and keeps them until ctx ends.
func (r *Router) WarmUp(ctx context.Context) {
	r.warm.mu.Lock()
	r.warm.init()
	r.warm.ctx = ctx
	r.warm.mu.Unlock()
	n := r.Config().Agent.Warm
	if n <= 0 {
		return
	}
	jids, err := r.Messages.RecentGroupChats(ctx, n)
	if err != nil {
		r.Log.Warn().Err(err).Msg("pick the groups to keep agents ready for")
		return
	}
	for i := len(jids) - 1; i >= 0; i-- {
		if g, err := r.Groups.ByJID(ctx, jids[i]); err == nil {
			r.touchWarm(g.Folder)
		}
	}
}

// touchWarm marks folder as the most recently active group: it gets a
// standby (unless a run of it is going), and the group that falls out of
// the agent.warm most recent loses its own.
func (r *Router) touchWarm(folder string) {
	n := r.Config().Agent.Warm
	w := &r.warm
	w.mu.Lock()
	if w.ctx == nil || w.ctx.Err() != nil {
		w.mu.Unlock()
		return
	}
	w.recent = append([]string{folder}, removeString(w.recent, folder)...)
	if len(w.recent) > n {
		for _, f := range w.recent[max(n, 0):] {
			if sb := w.waiting[f]; sb != nil {
				delete(w.waiting, f)
				w.stop(sb)
			}
			if t := w.retry[f]; t != nil {
				t.Stop()
				delete(w.retry, f)
			}
		}
		w.recent = w.recent[:max(n, 0)]
	}
	w.mu.Unlock()
	r.ensureStandby(folder)
}

// stop ends sb and remembers it until it is gone; w.mu is held.
func (w *warm) stop(sb *standby) {
	sb.stopped = true
	sb.cancel()
	w.stopping[sb.run.group.Folder] = sb
}

// awaitStopped waits until no standby of folder told to stop still runs.
func (r *Router) awaitStopped(folder string) {
	w := &r.warm
	w.mu.Lock()
	sb := w.stopping[folder]
	w.mu.Unlock()
	if sb != nil {
		<-sb.ended
	}
}

// takeStandby hands over g's standby if it runs and was started with what
// a fresh run would get now (policy, options, session, command); a stale
// one is stopped. nil: start one cold.
func (r *Router) takeStandby(ctx context.Context, g groups.Group) *standby {
	r.awaitStopped(g.Folder)
	w := &r.warm
	w.mu.Lock()
	sb := w.waiting[g.Folder]
	delete(w.waiting, g.Folder)
	if sb != nil {
		sb.taken = true
	}
	w.mu.Unlock()
	if sb == nil {
		return nil
	}
	drop := func() *standby {
		w.mu.Lock()
		w.stop(sb)
		w.mu.Unlock()
		<-sb.ended
		return nil
	}
	if !closed(sb.run.running()) {
		return drop() // not running yet: a cold start is as fast
	}
	select {
	case <-sb.ended:
		return nil // it ended meanwhile (crash, killed)
	default:
	}
	if fp, err := r.fingerprint(ctx, g, true); err != nil || fp != sb.run.fingerprint {
		r.Log.Info().Str("group", g.Folder).Msg("the agent started ahead was started with another policy or session; starting a fresh one")
		return drop()
	}
	w.mu.Lock()
	delete(w.crashes, g.Folder)
	w.mu.Unlock()
	return sb
}

// RefreshWarm replaces every standby that was started with something a
// fresh run would no longer get (the config, the group's policy or its
// session changed), stops those of groups no longer registered, and
// starts those the most recent groups lack (agent.warm or agent.command
// changed). It does not wait for the stale ones to be gone.
func (r *Router) RefreshWarm(ctx context.Context) {
	w := &r.warm
	w.mu.Lock()
	current := make(map[string]*standby, len(w.waiting))
	for folder, sb := range w.waiting {
		current[folder] = sb
	}
	recent := append([]string(nil), w.recent...)
	w.mu.Unlock()
	// Fingerprints read SQLite: not under w.mu, which status takes.
	var stale []*standby
	for folder, sb := range current {
		g, err := r.Groups.ByFolder(ctx, folder)
		fp := ""
		if err == nil {
			fp, err = r.fingerprint(ctx, g, true)
		}
		if err != nil || fp != sb.run.fingerprint {
			stale = append(stale, sb)
		}
	}
	w.mu.Lock()
	for _, sb := range stale {
		if folder := sb.run.group.Folder; w.waiting[folder] == sb {
			delete(w.waiting, folder)
			w.stop(sb) // standbyEnded starts the next one
			r.Log.Info().Str("group", folder).Msg("the agent started ahead is replaced: the config, the group's policy or its session changed")
		}
	}
	w.mu.Unlock()
	for _, folder := range recent {
		r.ensureStandby(folder)
	}
}

// dropStandby stops folder's standby, if any (a task run takes the group).
func (r *Router) dropStandby(folder string) {
	r.warm.mu.Lock()
	if sb := r.warm.waiting[folder]; sb != nil {
		delete(r.warm.waiting, folder)
		r.warm.stop(sb)
	}
	r.warm.mu.Unlock()
	r.awaitStopped(folder)
}

// fingerprint sums up everything a run of g is started with but its
// prompt: a standby is used only when it is still the same.
func (r *Router) fingerprint(ctx context.Context, g groups.Group, useSession bool) (string, error) {
	cfg := r.Config()
	list, err := r.Groups.List(ctx)
	if err != nil {
		return "", err
	}
	eff := security.Resolve(cfg.HostSecurity, g.Policy(), cfg.SecurityHost(groups.Folders(list)))
	session := ""
	if useSession {
		if session, err = r.Messages.Session(ctx, g.Folder); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal([]any{eff, cfg.Agent, cfg.AssistantName, cfg.Timezone, g, session})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// adopt gives the standby sb the job's prompt: it answers it like a run
// started for it, and takes follow-ups and the request to finish from the
// job from now on. It returns when the agent has ended.
func (r *Router) adopt(ctx context.Context, sb *standby, job runner.Job, prompt string, top int64, stopFollow, followDone chan struct{}) error {
	a := sb.run
	// The prompt goes as a follow-up, written and listed under mu (see
	// follow), before follow starts from it, and only while the agent runs
	// (a retry's agent may be starting: the runner empties input/ first).
	var (
		file string
		err  error
	)
	for written := false; !written; {
		select {
		case <-a.running():
		case <-sb.ended:
			close(followDone)
			return <-sb.done
		}
		a.mu.Lock()
		if written = closed(a.started); written {
			file, err = runner.FollowUp(ctx, a.ipcDir, prompt, r.Reporter)
			if err == nil {
				a.batches, a.delivered, a.adopted = []batch{{top, file}}, top, prompt
			}
		}
		a.mu.Unlock()
	}
	if err != nil {
		sb.stop()
		<-sb.done
		close(followDone)
		return err
	}
	close(a.prompted) // the turn limits start
	r.Log.Debug().Str("group", a.group.Folder).Msg("a message for an agent started ahead")
	if r.Typing != nil {
		r.Typing.SetTyping(ctx, a.replyTo, true)
		defer r.Typing.SetTyping(context.WithoutCancel(ctx), a.replyTo, false)
	}
	go func() {
		defer close(followDone)
		a.follow(ctx, job.More, stopFollow)
	}()
	go func() {
		select {
		case <-job.Closing:
			close(sb.closing)
		case <-ctx.Done():
			sb.stop()
		case <-followDone:
		}
	}()
	return <-sb.done
}

// stop ends a standby that was never given work.
func (sb *standby) stop() { sb.cancel() }

func removeString(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
