package router

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/confine"
	"github.com/nanoclawd/nanoclawd/internal/failure"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/metrics"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/prompt"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// testHookAgentExited, if set, is called when an agent process of a run
// has exited, before the run decides what follows: tests interleave there.
var testHookAgentExited func(*agentRun)

// agentRun is one agent process for a group: its handler state.
type agentRun struct {
	router     *Router
	group      groups.Group
	replyTo    string
	useSession bool
	fresh      bool      // the saved session was gone: this run starts a new one
	resumed    bool      // the agent was handed a saved session to resume
	since      time.Time // when the run read its session
	// A standby (adopt.go) starts without a prompt and waits for its first
	// one; adopted holds that prompt once it was handed over.
	standby     bool
	adopted     string
	fingerprint string
	prompted    chan struct{} // a standby's: closed once adopt handed it its prompt (runner.Spec.Prompted)
	early       bool          // a standby that answered before it was given a prompt
	typing      bool          // start showed the chat that the assistant is at work

	mu         sync.Mutex
	cur        cursor // the prompt batches handed over and answered (a message run's)
	answered   int    // result frames seen
	sent       int    // replies queued
	violations int
	lastText   string
	failure    string // the last error frame
	told       bool   // the chat was told of an error result (failure.go)
	unanswered string // the relay's error when it gave up on the upstreams (unanswered.go)
	ipcDir     string
	started    chan struct{}        // closed once the agent process runs; a retry's start replaces it
	ended      bool                 // the agent's output ended: it is exiting and reads no more follow-ups
	conf       *confine.Confinement // the OS sandbox of a non-main run
	meter      *usage.Meter         // what the run's relay counts
	eff        security.Effective   // the run's policy
	mark       int                  // the agent's process group, recorded in agent_marks
	startedAt  time.Time            // when the agent process first started
	// arrived is when a message run's batch came, until its agent started
	// (OnStart tells Metrics, then clears it).
	arrived time.Time
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

// start runs the group's agent for prompt. When the agent finds the
// session it was to resume gone, a second one starts, once, with a fresh
// session (restart).
func (a *agentRun) start(ctx context.Context, job runner.Job, prompt string, isTask bool) error {
	defer a.stopTyping(ctx)
	for {
		again, err := a.attempt(ctx, job, prompt, isTask)
		if !again {
			return err
		}
		prompt = a.restart(ctx, prompt)
	}
}

// stopTyping ends what start showed in the chat.
func (a *agentRun) stopTyping(ctx context.Context) {
	if a.typing {
		a.router.Typing.SetTyping(context.WithoutCancel(ctx), a.replyTo, false)
	}
}

// restart readies the run for a second agent after the first found its
// session gone, and returns that agent's prompt. follow writes nothing
// until the new agent runs (the runner empties input/ before each start),
// and a message run's prompt is made again from every message still
// unanswered — the first agent answered none — so a follow-up handed to
// the first agent, or deleted with input/, is in it.
func (a *agentRun) restart(ctx context.Context, prompt string) string {
	a.mu.Lock()
	a.fresh, a.failure = true, ""
	a.started, a.ended = make(chan struct{}), false
	if a.standby && a.adopted != "" { // the prompt went to the standby as its first input
		prompt, a.standby = a.adopted, false
		a.startedAt = time.Time{} // its start was before the job
	}
	message := a.cur.messages()
	a.mu.Unlock()
	if !message {
		return prompt
	}
	msgs, err := a.router.Messages.Unanswered(ctx, a.group.JID)
	if err != nil || !anyCalls(a.group, msgs) {
		return prompt
	}
	prompt, top := a.router.promptOf(msgs)
	a.mu.Lock()
	a.cur = startAt(top, "")
	a.mu.Unlock()
	return prompt
}

// running returns the channel closed once the current agent runs.
func (a *agentRun) running() chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started
}

// follow hands messages that arrive during the run to the agent. It
// writes only while an agent runs: the runner empties input/ before each
// start, which would delete an earlier follow-up.
func (a *agentRun) follow(ctx context.Context, more <-chan struct{}, stop <-chan struct{}) {
	pending := false // messages came while a retry's agent was starting
	for {
		select {
		case <-a.running():
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
		if !pending {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-more:
			}
		}
		pending = false
		if a.outputEnded() {
			continue // the next run has these messages (the queue runs the group again), or a retry's prompt
		}
		if a.router.Media.Wait(ctx, a.group.JID, stop) != nil {
			return
		}
		a.mu.Lock()
		from := a.cur.delivered
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
		if !closed(a.started) || a.cur.delivered != from {
			a.mu.Unlock()
			pending = true // a retry is starting another agent: for it, once it runs
			continue
		}
		if a.ended {
			a.mu.Unlock()
			continue
		}
		file, err := runner.FollowUp(ctx, a.ipcDir, prompt, a.router.Reporter)
		if err == nil {
			a.cur.hand(top, file)
		}
		a.mu.Unlock()
		if err != nil {
			a.router.Log.Error().Err(err).Str("group", a.group.Folder).Msg("follow-up; it will come with the next run")
		} else {
			a.router.observeStart(metrics.StartFollowUp, a.router.arrived.of(a.group.JID, msgs))
		}
	}
}

// outputEnded tells whether the current agent's output has ended.
func (a *agentRun) outputEnded() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ended
}

// OnOutputEnd implements runner.OutputEnder: the agent closed its output,
// as it does when it exits. A follow-up written now would never be read —
// in the moment before its exit is seen, a message sent after an answer
// used to be written to input/ for nobody, counted as a follow-up start,
// and then removed by the next run, which answers it.
func (a *agentRun) OnOutputEnd() {
	a.mu.Lock()
	a.ended = true
	a.mu.Unlock()
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// OnStart implements runner.Handler.
func (a *agentRun) OnStart(pid int) {
	if a.conf != nil {
		a.conf.Started(pid)
	}
	a.mu.Lock()
	if a.started != nil {
		close(a.started)
	}
	if a.startedAt.IsZero() {
		a.startedAt = time.Now()
	}
	arrived := a.arrived
	a.arrived = time.Time{} // a retry's agent takes the same batch: one start
	a.mu.Unlock()
	a.router.observeStart(metrics.StartCold, arrived)
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
	if a.standby && a.adopted == "" {
		// No prompt was handed to it: whatever it answers (a file it took
		// from input/ while being stopped, or a command that does not wait
		// for its prompt) is not the chat's to get.
		a.early = true
		a.router.Log.Warn().Str("group", a.group.Folder).Str("status", res.Status).Msg("an agent started ahead answered before it was given a prompt; dropped")
		return
	}
	if res.CostUSD != nil && a.meter != nil {
		// Beside the relay's own count, never instead of it: the agent
		// could say anything.
		if err := a.router.Usage.RecordAgentCost(ctx, a.group.Folder, a.meter.Run(), *res.CostUSD, time.Now()); err != nil {
			a.router.Log.Warn().Err(err).Msg("record the agent's cost estimate")
		}
	}
	if res.Status != "success" {
		if a.unanswered != "" {
			return // the agent's own word of the failure its chat was told of
		}
		a.onError(ctx, res.Error)
		return
	}
	a.answered++
	a.router.owner.clear()
	text := ""
	if res.Result != nil {
		text = prompt.StripInternal(*res.Result)
	}
	if text != "" {
		a.lastText = text
	}
	a.queue(ctx, text, outbox.KindReply, a.cur.answer())
}

// ownCredential reports whether the group's requests take the daemon's
// own credential, from agent.env (another provider's is in the config,
// and "no credential is set" is not its case).
func (a *agentRun) ownCredential() bool {
	return a.router.Config().OwnCredential(a.group.Provider())
}

// onError answers an error result (failure.go): the chat gets one plain
// sentence for the batch it failed, the owner the detail, and a failure
// that a retry cannot fix ends the run.
func (a *agentRun) onError(ctx context.Context, errText string) {
	if errText == "" {
		errText = "unknown error"
	}
	a.failure = errText
	a.router.Log.Warn().Str("group", a.group.Folder).Str("error", failure.Redact(errText)).Msg("agent result error")
	if a.resumed && !a.fresh && a.answered == 0 && failure.SessionGone(errText) {
		return // start runs it again with a fresh session
	}
	f := failure.Classify(errText)
	if f.Kind == "credential" && (a.meter == nil || !a.meter.CredentialRefused()) {
		// No upstream answered 401 or 403: nothing was refused.
		f = failure.NotSent
		if env := a.router.Config().Agent.Env; a.ownCredential() && !security.CredentialSet(env, os.Getenv) {
			f = failure.NoCredential(env, os.Getenv)
		}
	}
	a.told = true
	// Over budget or a refused credential: the relay told the main chat itself.
	relayTold := a.meter != nil && a.meter.StoppedBy() != ""
	a.queue(ctx, a.router.failureNotice(ctx, a.group, f, errText, relayTold), outbox.KindNotice, a.cur.answer())
	if f.Final {
		if err := runner.Close(ctx, a.ipcDir, a.router.Reporter); err != nil {
			a.router.Log.Warn().Err(err).Str("group", a.group.Folder).Msg("ask the failed agent to finish")
		}
	}
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
