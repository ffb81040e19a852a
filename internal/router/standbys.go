package router

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/runner"
)

// The life of a standby (warm.go): it is started for one of the agent.warm
// most recently active groups that has none and no run going; it waits up
// to agent.warmFor for its prompt; when it ends for any other reason than
// being taken or expiring, it is started again — at once when it was
// replaced, with backoff when it ended on its own (a crash, a kill) —
// unless its command does not wait for a prompt at all.

// Backoff of a standby that ended on its own: it doubles from the first
// delay up to the last; a standby that lived restartCalm counts as calm,
// and its end starts the doubling again.
const (
	restartFirst = time.Second
	restartLast  = 5 * time.Minute
	restartCalm  = time.Minute
)

// Standbys returns, for each group whose agent is started ahead and
// waiting for its first prompt, when that agent was started.
func (r *Router) Standbys() map[string]time.Time {
	r.warm.mu.Lock()
	defer r.warm.mu.Unlock()
	out := make(map[string]time.Time, len(r.warm.waiting))
	for folder, sb := range r.warm.waiting {
		out[folder] = sb.since
	}
	return out
}

// enter and leave bracket a run of folder: no standby is started for a
// group while its own run goes.
func (w *warm) enter(folder string) {
	w.mu.Lock()
	w.init()
	w.busy[folder]++
	w.mu.Unlock()
}

func (w *warm) leave(folder string) {
	w.mu.Lock()
	if w.busy[folder]--; w.busy[folder] <= 0 {
		delete(w.busy, folder)
	}
	w.mu.Unlock()
}

// commandKey identifies an agent.command.
func commandKey(cfg *config.Config) string { return strings.Join(cfg.Agent.Command, "\x00") }

// wants tells whether folder should get a standby now; w.mu is held.
func (w *warm) wants(folder string, cfg *config.Config) bool {
	n := cfg.Agent.Warm
	return w.ctx != nil && w.ctx.Err() == nil && n > 0 &&
		slices.Contains(w.recent[:min(n, len(w.recent))], folder) &&
		w.waiting[folder] == nil && w.stopping[folder] == nil && w.busy[folder] == 0 && w.retry[folder] == nil &&
		w.unfit != commandKey(cfg)
}

// ensureStandby starts folder's standby if it should have one now.
func (r *Router) ensureStandby(folder string) {
	cfg := r.Config()
	w := &r.warm
	w.mu.Lock()
	ok, ctx := w.wants(folder, cfg), w.ctx
	w.mu.Unlock()
	if !ok {
		return
	}
	g, err := r.Groups.ByFolder(ctx, folder) // SQLite: not under w.mu
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wants(folder, cfg) {
		w.waiting[folder] = r.startStandby(w.ctx, g, cfg)
	}
}

// startStandby starts an agent for g that waits for its first prompt; w.mu
// is held.
func (r *Router) startStandby(parent context.Context, g groups.Group, cfg *config.Config) *standby {
	ctx, cancel := context.WithCancel(parent)
	sb := &standby{cancel: cancel, closing: make(chan struct{}), done: make(chan error, 1), ended: make(chan struct{}),
		since: time.Now(), command: commandKey(cfg)}
	sb.run = &agentRun{router: r, group: g, replyTo: g.JID, useSession: true, standby: true,
		started: make(chan struct{}), prompted: make(chan struct{})}
	go func() {
		expiry := time.AfterFunc(cfg.Agent.WarmFor.D(), func() { r.expire(sb) })
		err := sb.run.start(ctx, runner.Job{Folder: g.Folder, Closing: sb.closing}, "", false)
		expiry.Stop()
		sb.done <- err
		close(sb.ended)
		r.standbyEnded(sb, err)
	}()
	return sb
}

// expire stops sb if it is still waiting for its first prompt after
// agent.warmFor: its group has been quiet that long.
func (r *Router) expire(sb *standby) {
	w := &r.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	folder := sb.run.group.Folder
	if w.waiting[folder] != sb {
		return
	}
	delete(w.waiting, folder)
	w.recent = removeString(w.recent, folder) // its next message makes it recent again
	sb.expired = true
	w.stop(sb)
	r.Log.Info().Str("group", folder).Dur("waited", time.Since(sb.since)).Msg("the agent started ahead waited agent.warmFor for a message; stopped")
}

// standbyEnded decides what follows the end of sb.
func (r *Router) standbyEnded(sb *standby, err error) {
	w := &r.warm
	folder := sb.run.group.Folder
	sb.run.mu.Lock()
	early := sb.run.early
	sb.run.mu.Unlock()
	w.mu.Lock()
	if w.waiting[folder] == sb {
		delete(w.waiting, folder)
	}
	if w.stopping[folder] == sb {
		delete(w.stopping, folder)
	}
	again := false
	switch {
	case sb.taken || sb.expired || w.ctx.Err() != nil:
		// Its run's to report; its group was quiet for agent.warmFor; or
		// the daemon stops.
	case sb.stopped:
		again = true // replaced (stale) or dropped: the next one is due now
	case early || err == nil:
		// An agent command that does not wait for its prompt (a stand-in,
		// a custom command): started again it would only do the same.
		if w.unfit != sb.command {
			w.unfit = sb.command
			r.Log.Warn().Str("group", folder).Strs("command", strings.Split(sb.command, "\x00")).
				Msg("the agent command answered or exited before it was given a prompt: agents are not started ahead for it (agent.warm)")
		}
	default:
		n := w.crashes[folder] + 1
		if time.Since(sb.since) >= restartCalm {
			n = 1
		}
		w.crashes[folder] = n
		delay := min(restartFirst<<min(n-1, 10), restartLast)
		w.retry[folder] = time.AfterFunc(delay, func() {
			w.mu.Lock()
			delete(w.retry, folder)
			w.mu.Unlock()
			r.ensureStandby(folder)
		})
		r.Log.Warn().Err(err).Str("group", folder).Int("in_a_row", n).Dur("restart_in", delay).
			Msg("the agent started ahead ended before it was given a prompt; starting another")
	}
	w.mu.Unlock()
	if again {
		r.ensureStandby(folder)
	}
}
