package router

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// sessionGone tells whether an agent's error says its saved session no
// longer exists.
func sessionGone(failure string) bool {
	return strings.Contains(strings.ToLower(failure), "no conversation found")
}

// agentRun is one agent process for a group: its handler state.
type agentRun struct {
	router     *Router
	group      groups.Group
	replyTo    string
	useSession bool
	fresh      bool      // the saved session was gone: this run starts a new one
	since      time.Time // when the run read its session
	// A standby (warm.go) starts without a prompt and waits for its first
	// one; adopted holds that prompt once it was handed over.
	standby     bool
	adopted     string
	fingerprint string

	mu         sync.Mutex
	batches    []batch // each prompt batch handed over (initial, then follow-ups)
	matched    int     // batches answered: batches[matched] is the oldest waiting
	answered   int     // result frames seen
	delivered  int64   // highest seq handed to the agent
	sent       int     // replies queued
	violations int
	lastText   string
	failure    string // the last error frame
	ipcDir     string
	started    chan struct{}      // closed once the agent process runs (message runs)
	conf       *confinement       // the OS sandbox of a non-main run
	meter      *runMeter          // what the run's relay counts
	eff        security.Effective // the run's policy
	mark       int                // the agent's process group, recorded in agent_marks
	startedAt  time.Time          // when the agent process first started
}

// batch is messages handed to the agent in one prompt.
type batch struct {
	top  int64  // the highest seq among them
	file string // the follow-up file that carried them; "" for the prompt on stdin
}

// startTime is when this run's agent started inside the queue's job; zero
// for a standby (it started before the job took it) or a run that never
// got its agent going.
func (a *agentRun) startTime() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.standby {
		return time.Time{}
	}
	return a.startedAt
}

func (a *agentRun) start(ctx context.Context, job runner.Job, prompt string, isTask bool) error {
	r, g := a.router, a.group
	cfg := r.Config()
	list, err := r.Groups.List(ctx)
	if err != nil {
		return err
	}
	eff := security.Resolve(cfg.HostSecurity, g.Policy(), cfg.SecurityHost(groups.Folders(list)))
	a.eff = eff
	if a.standby && a.adopted == "" {
		if a.fingerprint, err = r.fingerprint(ctx, g, a.useSession); err != nil {
			return err
		}
	}
	p := pathsOf(cfg, g.Folder)
	a.ipcDir = p.ipc
	for _, d := range []string{layout.IPCDir(p.ipc).Input(), p.session, p.logs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("prepare %s: %w", d, err)
		}
	}
	if r.Snapshots != nil {
		if err := r.Snapshots.Refresh(ctx, g.Folder, g.IsMain); err != nil {
			r.Log.Warn().Err(err).Str("group", g.Folder).Msg("refresh the snapshot files of the IPC directory")
		}
	}
	token, err := r.Tokens.Issue(ctx, g.Folder)
	if err != nil {
		return fmt.Errorf("issue IPC token: %w", err)
	}
	defer func() {
		if err := r.Tokens.Finish(context.WithoutCancel(ctx), token); err != nil {
			r.Log.Error().Err(err).Msg("finish IPC token")
		}
	}()
	a.since = time.Now()
	session := ""
	if a.useSession && !a.fresh {
		if session, err = r.Messages.Session(ctx, g.Folder); err != nil {
			return err
		}
	}
	spec, err := agentSpec(specInput{
		Group: g, Config: cfg, Policy: eff, Prompt: prompt, IsTask: isTask, Standby: a.standby && a.adopted == "",
		Session: session, Token: token, Binary: r.Binary, Getenv: os.LookupEnv,
	})
	if err != nil {
		return err
	}
	spec.Closing = job.Closing
	if r.Typing != nil && !a.standby {
		r.Typing.SetTyping(ctx, a.replyTo, true)
		defer r.Typing.SetTyping(context.WithoutCancel(ctx), a.replyTo, false)
	}
	var meter gateway.Meter
	if r.Usage != nil {
		a.meter = r.newMeter(g)
		meter = a.meter
	}
	if !g.IsMain {
		if a.conf, err = r.confine(ctx, cfg, g, eff, &spec, p.session, meter); err != nil {
			return err
		}
		defer a.conf.done()
	} else {
		relay, err := r.relayMain(g, &spec, meter)
		if err != nil {
			return err
		}
		defer relay.Close()
	}
	out, err := runner.Run(ctx, spec, a)
	if a.conf != nil && a.conf.exceeded() != "" {
		err = runner.NoRetry(fmt.Errorf("the run was stopped: %s", a.conf.exceeded()))
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
	if session != "" && !a.fresh && a.answered == 0 && sessionGone(a.failure) && (err == nil || errors.As(err, &exitErr)) {
		// The CLI prunes old transcripts: resuming a session it no longer
		// has fails every time. Start a fresh one, once, for the same messages.
		r.Log.Warn().Str("group", g.Folder).Str("session", session).Msg("the agent's saved session is gone; starting a fresh one")
		r.Messages.ResetSession(context.WithoutCancel(ctx), g.Folder)
		a.fresh, a.failure, a.started = true, "", nil
		if a.standby { // the prompt went to the standby as its first input
			prompt, a.standby = a.adopted, false
			a.mu.Lock()
			a.startedAt = time.Time{} // its start was before the job
			a.mu.Unlock()
		}
		return a.start(ctx, job, prompt, isTask)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !g.IsMain && a.violations > 0 && a.sent == 0 {
		a.queue(context.WithoutCancel(ctx), alerts.GroupNotice(cfg.AssistantName), outbox.KindNotice, 0)
	}
	if err == nil && a.failure != "" && a.answered == 0 {
		err = fmt.Errorf("agent reported an error: %s", a.failure)
	}
	if err != nil && a.meter != nil && a.meter.stoppedBy() != "" {
		// Over budget or a refused credential: a retry would fail the same
		// way (and ask again), so the run gives up at once.
		return runner.NoRetry(fmt.Errorf("%s: %w", a.meter.stoppedBy(), err))
	}
	return err
}

// follow hands messages that arrive during the run to the agent. It
// starts only once the agent runs: the runner empties input/ before the
// start, which would delete an earlier follow-up.
func (a *agentRun) follow(ctx context.Context, more <-chan struct{}, stop <-chan struct{}) {
	select {
	case <-a.started:
	case <-stop:
		return
	case <-ctx.Done():
		return
	}
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-more:
		}
		a.mu.Lock()
		from := a.delivered
		a.mu.Unlock()
		msgs, err := a.router.Messages.After(ctx, a.group.JID, from)
		if err != nil || len(msgs) == 0 {
			continue
		}
		if !anyCalls(a.group, msgs) {
			continue // chatter stays context until a message calls the assistant
		}
		if a.useSession {
			if reset, err := a.router.Messages.ResetSince(ctx, a.group.Folder, a.since); err != nil || reset {
				continue // after a /new they belong to the fresh session of the next run
			}
		}
		prompt, top := a.router.promptOf(msgs)
		// Written and listed under mu, so OnResult never sees the file
		// before its batch (a fast agent's answer would then move no
		// cursor, and the messages would be answered again next run).
		a.mu.Lock()
		file, err := runner.FollowUp(a.ipcDir, prompt)
		if err == nil {
			a.batches = append(a.batches, batch{top, file})
			a.delivered = top
		}
		a.mu.Unlock()
		if err != nil {
			a.router.Log.Error().Err(err).Str("group", a.group.Folder).Msg("follow-up; it will come with the next run")
		}
	}
}

// OnStart implements runner.Handler.
func (a *agentRun) OnStart(pid int) {
	if a.started != nil {
		close(a.started)
	}
	if a.conf != nil {
		a.conf.started(pid)
	}
	a.mu.Lock()
	if a.startedAt.IsZero() {
		a.startedAt = time.Now()
	}
	a.mu.Unlock()
	mark, err := a.router.Ledger.Mark(context.Background(), a.group.Folder, pid)
	if err != nil {
		a.router.Log.Warn().Err(err).Msg("record agent process group")
	}
	a.mark = mark
}

// OnResult implements runner.Handler: a result answers the oldest
// unanswered prompt batch; its text and the cursor move together.
func (a *agentRun) OnResult(res runner.Result) {
	ctx := context.Background()
	a.mu.Lock()
	defer a.mu.Unlock()
	if res.Status != "success" {
		a.failure = res.Error
		if a.failure == "" {
			a.failure = "unknown error"
		}
		a.router.Log.Warn().Str("group", a.group.Folder).Str("error", a.failure).Msg("agent result error")
		return
	}
	if a.standby && a.adopted == "" {
		// No prompt was handed to it: whatever it answers (a file it took
		// from input/ while being stopped) is not the chat's to get.
		a.router.Log.Warn().Str("group", a.group.Folder).Msg("an agent started ahead answered before it was given a prompt; dropped")
		return
	}
	a.answered++
	text := ""
	if res.Result != nil {
		text = StripInternal(*res.Result)
	}
	// A result answers the oldest batch waiting, once the agent has taken
	// it: a follow-up file still in input/ was not read, so a result now
	// (one an agent gives of itself, say when asked to finish) is not its
	// answer. Its text goes out; the messages wait for the next run.
	var upTo int64
	if a.matched < len(a.batches) && !waiting(a.batches[a.matched].file) {
		upTo = a.batches[a.matched].top
		a.matched++
	}
	if text != "" {
		a.lastText = text
	}
	a.queue(ctx, text, outbox.KindReply, upTo)
}

// waiting reports whether the follow-up file is still there for the agent
// to take.
func waiting(file string) bool {
	if file == "" {
		return false
	}
	_, err := os.Lstat(file)
	return err == nil
}

// queue puts text (if any) in the outbox and moves the cursor to upTo (if
// any) in one transaction.
func (a *agentRun) queue(ctx context.Context, text, kind string, upTo int64) {
	if err := a.router.Messages.Answer(ctx, a.router.Outbox, messages.Answer{ReplyTo: a.replyTo, Text: text, Kind: kind, Chat: a.group.JID, UpTo: upTo}); err != nil {
		a.router.Log.Error().Err(err).Str("group", a.group.Folder).Msg("queue the answer; the messages stay unanswered")
		return
	}
	if text != "" {
		a.sent++
	}
}

// OnViolation implements runner.Handler.
func (a *agentRun) OnViolation(v security.Violation) {
	a.mu.Lock()
	a.violations++
	a.mu.Unlock()
	v.Group = a.group.Folder
	v.Rule = security.RuleFor(a.eff, v.Kind, v.Tool)
	if err := a.router.Reporter.Report(context.Background(), v); err != nil {
		a.router.Log.Error().Err(err).Str("group", v.Group).Msg("report violation")
	}
}
