package router

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/failure"
	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/spec"
)

// One agent of a run: prepare readies what it is started with, the runner
// runs it, finish settles what it leaves (its session, a retry, the
// group's notice).

// prepared is one agent of a run, ready to start.
type prepared struct {
	spec    runner.Spec
	session string   // the saved session it resumes; "" starts a fresh one
	release []func() // what ends with the agent (the IPC token, its sandbox or relay), in reverse
	// unanswered hears from the agent's relay when no model upstream
	// answers: the attempt is ended then (unanswered.go).
	unanswered chan string
}

// close releases what prepare took, the last first.
func (p *prepared) close() {
	for i := len(p.release) - 1; i >= 0; i-- {
		p.release[i]()
	}
}

// attempt runs one agent for prompt. It reports true when that agent found
// its session gone and the run is to start another with a fresh one.
func (a *agentRun) attempt(ctx context.Context, job runner.Job, prompt string, isTask bool) (bool, error) {
	p, err := a.prepare(ctx, job, prompt, isTask)
	defer p.close()
	if err != nil {
		return false, err
	}
	a.resumed = p.session != ""
	actx, end := context.WithCancel(ctx)
	defer end()
	go a.endWhenUnanswered(actx, p.unanswered, end)
	out, err := runner.Run(actx, p.spec, a)
	if why := a.unansweredWhy(); why != "" {
		// The relay gave up and the chat was told: not the agent's failure,
		// and a retry would wait on the same upstreams again.
		err = runner.NoRetry(errors.New(why))
	}
	if testHookAgentExited != nil {
		testHookAgentExited(a)
	}
	return a.finish(ctx, p.session, out, err)
}

// prepare resolves the group's policy, readies its directories, issues
// the run's IPC token, reads the session to resume and builds the spec;
// a non-main agent gets its sandbox, the main group's a relay of its own.
// What it took is in the result's release, also on an error.
func (a *agentRun) prepare(ctx context.Context, job runner.Job, prompt string, isTask bool) (*prepared, error) {
	r, g := a.router, a.group
	cfg := r.Config()
	p := &prepared{unanswered: make(chan string, 1)}
	list, err := r.Groups.List(ctx)
	if err != nil {
		return p, err
	}
	eff := security.Resolve(cfg.HostSecurity, g.Policy(), cfg.SecurityHost(groups.Folders(list)))
	a.eff = eff
	if a.standby && a.adopted == "" {
		if a.fingerprint, err = r.fingerprint(ctx, g, a.useSession); err != nil {
			return p, err
		}
	}
	dirs := spec.DirsOf(cfg, g.Folder)
	a.ipcDir = dirs.IPC
	if err := spec.PrepareDirs(ctx, g, dirs, r.Reporter); err != nil {
		return p, err
	}
	if r.Snapshots != nil {
		if err := r.Snapshots.Refresh(ctx, g.Folder, g.IsMain); err != nil && ctx.Err() == nil {
			r.Log.Warn().Err(err).Str("group", g.Folder).Msg("refresh the snapshot files of the IPC directory")
		}
	}
	token, err := r.Tokens.Issue(ctx, g.Folder)
	if err != nil {
		return p, fmt.Errorf("issue IPC token: %w", err)
	}
	p.release = append(p.release, func() {
		if err := r.Tokens.Finish(context.WithoutCancel(ctx), token); err != nil {
			r.Log.Error().Err(err).Msg("finish IPC token")
		}
	})
	a.since = time.Now()
	if a.useSession && !a.fresh {
		if p.session, err = r.Messages.Session(ctx, g.Folder); err != nil {
			return p, err
		}
	}
	p.spec, err = spec.For(spec.Input{
		Group: g, Config: cfg, Policy: eff, Prompt: prompt, IsTask: isTask, Standby: a.standby && a.adopted == "",
		Session: p.session, Token: token, Binary: r.Binary, Getenv: os.LookupEnv,
	})
	if err != nil {
		return p, err
	}
	p.spec.Closing = job.Closing
	p.spec.Reporter = r.Reporter
	if a.standby && a.adopted == "" {
		p.spec.Prompted = a.prompted
	}
	if r.Typing != nil && !a.standby && !a.typing {
		a.typing = true // until start returns, a retry's agent included
		r.Typing.SetTyping(ctx, a.replyTo, true)
	}
	var meter gateway.Meter
	if r.Usage != nil {
		a.meter = r.newMeter(g)
		meter = a.meter
	}
	if !g.IsMain {
		if a.conf, err = r.confine(ctx, cfg, g, eff, &p.spec, dirs.Session, meter, p.unanswered); err != nil {
			return p, err
		}
		p.release = append(p.release, a.conf.Finish)
		return p, nil
	}
	relay, err := r.relayMain(cfg, eff, &p.spec, meter, p.unanswered)
	if err != nil {
		return p, err
	}
	p.release = append(p.release, func() { relay.Close() })
	return p, nil
}

// finish settles an agent that has exited (out, err from the runner): it
// forgets its process group, saves the session it reports, and decides
// what follows — true: its saved session was gone, and another agent
// starts with a fresh one; else the run's error, if any, for the queue.
func (a *agentRun) finish(ctx context.Context, session string, out runner.Outcome, err error) (bool, error) {
	r, g := a.router, a.group
	if a.conf != nil && a.conf.Exceeded() != "" {
		err = runner.NoRetry(fmt.Errorf("the run was stopped: %s", a.conf.Exceeded()))
	}
	if err := r.Ledger.Unmark(context.WithoutCancel(ctx), a.mark); err != nil {
		r.Log.Warn().Err(err).Msg("forget the agent's process group")
	}
	if out.NewSessionID != "" && a.useSession {
		saved, err := r.Messages.SaveSession(context.WithoutCancel(ctx), g.Folder, out.NewSessionID, a.since)
		if err != nil {
			r.Log.Error().Err(err).Str("group", g.Folder).Msg("save session id")
		} else if !saved {
			r.Log.Info().Str("group", g.Folder).Msg("the session was reset during the run; the next run starts fresh")
		}
	}
	var exitErr *runner.ExitError
	if session != "" && !a.fresh && a.answered == 0 && failure.SessionGone(a.failure) && (err == nil || errors.As(err, &exitErr)) {
		// The CLI prunes old transcripts: resuming a session it no longer
		// has fails every time. Start a fresh one, once, for the same messages.
		r.Log.Warn().Str("group", g.Folder).Str("session", session).Msg("the agent's saved session is gone; starting a fresh one")
		r.Messages.ResetSession(context.WithoutCancel(ctx), g.Folder)
		return true, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !g.IsMain && a.violations > 0 && a.sent == 0 {
		a.queue(context.WithoutCancel(ctx), alerts.GroupNotice(r.Config().AssistantName), outbox.KindNotice, 0)
	}
	if a.told {
		if err == nil {
			err = fmt.Errorf("agent reported an error: %s", a.failure)
		}
		err = &toldError{err}
	}
	if err != nil && a.meter != nil && a.meter.StoppedBy() != "" {
		// Over budget or a refused credential: a retry would fail the same
		// way (and ask again), so the run gives up at once.
		return false, runner.NoRetry(fmt.Errorf("%s: %w", a.meter.StoppedBy(), err))
	}
	return false, err
}
