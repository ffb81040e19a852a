package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/metrics"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/standby"
)

// The router's side of agents started ahead: package standby keeps the
// pool and starts agentRuns through starter; adopt hands one a run's
// prompt.

// standbys is the router's pool of agents started ahead.
type standbys struct {
	once sync.Once
	pool *standby.Pool[*agentRun]
}

// pool is the router's standby pool, ready for use.
func (r *Router) pool() *standby.Pool[*agentRun] {
	r.standbys.once.Do(func() {
		r.standbys.pool = standby.New[*agentRun](starter{r}, r.Groups, r.Messages, r.Config, r.Log)
	})
	return r.standbys.pool
}

// WarmUp starts standbys for the agent.warm most recently active groups,
// and keeps them until ctx ends; a taken one ends with its run.
func (r *Router) WarmUp(ctx context.Context) { r.pool().WarmUp(ctx) }

// WaitWarm returns once every agent started ahead is gone and what its
// run keeps in SQLite is settled (after WarmUp's ctx ended).
func (r *Router) WaitWarm() { r.pool().Wait() }

// RefreshWarm replaces every standby that was started with something a
// fresh run would no longer get (the config, the group's policy or its
// session changed), stops those of groups no longer registered, and
// starts those the most recent groups lack (agent.warm or agent.command
// changed). It does not wait for the stale ones to be gone.
func (r *Router) RefreshWarm(ctx context.Context) { r.pool().Refresh(ctx) }

// Standbys returns, for each group whose agent is started ahead and
// waiting for its first prompt, when that agent was started.
func (r *Router) Standbys() map[string]time.Time { return r.pool().Status() }

// starter starts the pool's agents: agentRuns that wait for their first
// prompt.
type starter struct{ r *Router }

func (s starter) New(g groups.Group) *agentRun {
	return &agentRun{router: s.r, group: g, replyTo: g.JID, useSession: true, standby: true,
		started: make(chan struct{}), prompted: make(chan struct{})}
}

// Run runs a standby until it ends. Its ctx ends only when the pool
// stops it, and a standby a run took only when the daemon stops: that end
// is errShuttingDown, so the run it answered is not recorded as failed.
func (starter) Run(ctx context.Context, a *agentRun, closing <-chan struct{}) error {
	err := a.start(ctx, runner.Job{Folder: a.group.Folder, Closing: closing}, "", false)
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w (%w)", errShuttingDown, err)
	}
	return err
}

func (s starter) Fingerprint(ctx context.Context, g groups.Group) (string, error) {
	return s.r.fingerprint(ctx, g, true)
}

// Running, Fingerprint and Early make an agentRun a standby.Agent.
func (a *agentRun) Running() <-chan struct{} { return a.running() }
func (a *agentRun) Fingerprint() string      { return a.fingerprint }
func (a *agentRun) Early() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.early
}

// adopt gives sb the job's prompt: it answers it like a run started for
// it, and takes follow-ups and the request to finish from the job from
// now on. It returns when the agent has ended.
func adopt(ctx context.Context, sb *standby.Standby[*agentRun], job runner.Job, prompt string, top int64, arrived time.Time, stopFollow, followDone chan struct{}) error {
	a := sb.Agent
	r := a.router
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
		case <-sb.Ended():
			close(followDone)
			return sb.Wait()
		}
		a.mu.Lock()
		if written = closed(a.started); written {
			file, err = runner.FollowUp(ctx, a.ipcDir, prompt, r.Reporter)
			if err == nil {
				a.cur, a.adopted = startAt(top, file), prompt
			}
		}
		a.mu.Unlock()
	}
	if err != nil {
		sb.Stop()
		sb.Wait()
		close(followDone)
		return err
	}
	close(a.prompted) // the turn limits start
	r.observeStart(metrics.StartStandby, arrived)
	r.Log.Debug().Str("group", a.group.Folder).Msg("a message for an agent started ahead")
	if r.Typing != nil {
		r.Typing.SetTyping(ctx, a.replyTo, true)
		defer r.Typing.SetTyping(context.WithoutCancel(ctx), a.replyTo, false)
	}
	go func() {
		defer close(followDone)
		a.follow(ctx, job.More, stopFollow)
	}()
	// The run's end ends the agent, even after it was asked to close: a
	// standby's own context outlives the daemon's (it is the run's to end),
	// so a shutdown whose grace ran out kills it only through this.
	defer context.AfterFunc(ctx, sb.Stop)()
	go func() {
		select {
		case <-job.Closing:
			sb.Close()
		case <-followDone:
		}
	}()
	return sb.Wait()
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
	// The values agent.env hands on too: a key changed in nanoclawd.env
	// replaces an agent started with the old one (hashed, never shown).
	env := map[string]string{}
	for _, name := range cfg.Agent.Env {
		env[name] = os.Getenv(name)
	}
	b, err := json.Marshal([]any{eff, cfg.Agent, cfg.AssistantName, cfg.Timezone, g, session, env})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
