package router

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/failure"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/prompt"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
)

// The router as the queue's worker: a message run answers the group's
// unanswered messages, a task run does one scheduled task.

// Run does one job of the queue and records it as the group's last run
// (status shows it) when it started an agent, took one started ahead, or
// failed.
func (r *Router) Run(ctx context.Context, job runner.Job) error {
	t0 := time.Now()
	var (
		run *agentRun
		err error
	)
	standbys := r.pool()
	standbys.Enter(job.Folder)
	if job.TaskID != "" {
		run, err = r.runTask(ctx, job)
	} else {
		run, err = r.runMessages(ctx, job)
	}
	standbys.Leave(job.Folder)
	if job.TaskID == "" && run != nil {
		standbys.Touch(job.Folder) // the group gets an agent started ahead
	} else {
		standbys.Ensure(job.Folder) // one a task run took the place of
	}
	if run == nil && err == nil {
		return nil // nothing to answer: not a run to show
	}
	// A clean shutdown that cut it short is no failure (status says
	// "stopped"), and its messages are answered after the restart.
	stopped := err != nil && (ctx.Err() != nil || errors.Is(err, errShuttingDown))
	if stopped {
		r.Log.Info().Str("group", job.Folder).Msg("run stopped by the shutdown; its messages are answered after the next start")
	}
	last := runner.LastRun{Folder: job.Folder, Started: t0, Finished: time.Now(), OK: err == nil || stopped, Stopped: stopped, TaskID: job.TaskID}
	if run != nil {
		if s := run.startTime(); !s.IsZero() {
			last.Started = s
		}
	}
	if !last.OK {
		last.Error = err.Error()
	}
	if rerr := r.Ledger.RecordLastRun(context.WithoutCancel(ctx), last); rerr != nil {
		r.Log.Warn().Err(rerr).Str("group", job.Folder).Msg("status will not show this run")
	}
	if stopped {
		return err
	}
	if r.Metrics != nil {
		r.Metrics.RunDone(last.Finished.Sub(last.Started))
	}
	if isTold(err) {
		return nil // its chat has its answer: nothing to retry or report again
	}
	return err
}

// runFailed is a message run's error with the highest seq the run was
// given, so that GiveUp can count those messages answered.
type runFailed struct {
	err error
	top int64
}

func (e *runFailed) Error() string { return e.err.Error() }
func (e *runFailed) Unwrap() error { return e.err }

// runMessages answers the group's unanswered messages, if one calls the
// assistant. The run is nil when no agent was asked.
func (r *Router) runMessages(ctx context.Context, job runner.Job) (*agentRun, error) {
	g, err := r.Groups.ByFolder(ctx, job.Folder)
	if errors.Is(err, groups.ErrNotFound) {
		return nil, nil // unregistered since
	}
	if err != nil {
		return nil, err
	}
	if g.Paused {
		return nil, nil // the owner said /pause: the messages wait for /resume
	}
	if err := r.Media.Wait(ctx, g.JID, nil); err != nil {
		return nil, err
	}
	msgs, err := r.Messages.Unanswered(ctx, g.JID)
	if err != nil || len(msgs) == 0 {
		return nil, err
	}
	if !anyCalls(g, msgs) {
		return nil, nil // context only; it comes along with the next trigger
	}
	prompt, top := r.promptOf(msgs)
	arrived := r.arrived.of(g.JID, msgs)
	var run *agentRun
	stopFollow := make(chan struct{})
	followDone := make(chan struct{})
	if sb := r.pool().Take(ctx, g); sb != nil {
		run = sb.Agent
		err = adopt(ctx, sb, job, prompt, top, arrived, stopFollow, followDone)
	} else {
		run = &agentRun{router: r, group: g, replyTo: g.JID, cur: startAt(top, ""), useSession: true,
			started: make(chan struct{}), arrived: arrived}
		go func() {
			defer close(followDone)
			run.follow(ctx, job.More, stopFollow)
		}()
		err = run.start(ctx, job, prompt, false)
	}
	close(stopFollow)
	<-followDone
	if err == nil {
		return run, nil
	}
	err = &runFailed{err: err, top: top}
	if errors.Is(err, runner.ErrTimeout) {
		// The same prompt would hang again and cost another timeout.
		return run, runner.NoRetry(err)
	}
	return run, err
}

// runTask does a scheduled task and records its outcome with the
// scheduler. A task is not retried: its schedule brings the next run.
func (r *Router) runTask(ctx context.Context, job runner.Job) (*agentRun, error) {
	task, err := r.Tasks.Get(ctx, job.TaskID)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", job.TaskID, err)
	}
	r.pool().Drop(task.GroupFolder) // one agent per group
	g, err := r.Groups.ByFolder(ctx, task.GroupFolder)
	if err != nil {
		return nil, r.Tasks.Done(ctx, task.ID, "", fmt.Errorf("group %s: %w", task.GroupFolder, err))
	}
	if g.Paused {
		return nil, r.Tasks.Done(ctx, task.ID, "", fmt.Errorf("group %s is paused (the owner's /pause); /resume %s starts its agents again", g.Folder, g.Folder))
	}
	run := &agentRun{router: r, group: g, replyTo: task.ChatJID, useSession: task.ContextMode != scheduler.ContextIsolated}
	runErr := run.start(ctx, job, prompt.Scheduled(task.Prompt), true)
	if err := r.Tasks.Done(ctx, task.ID, run.lastText, runErr); err != nil {
		r.Log.Error().Err(err).Str("task", task.ID).Msg("record task run")
	}
	return run, nil
}

// GiveUp is told by the queue that a run failed every retry. The group is
// told, and the messages that run was given count as answered, so the next
// message does not replay them; later ones still get their run.
func (r *Router) GiveUp(job runner.Job, runErr error) {
	ctx := context.Background()
	r.Log.Error().Err(runErr).Str("group", job.Folder).Str("task", job.TaskID).Msg("agent run failed; giving up")
	if job.TaskID != "" {
		return
	}
	g, err := r.Groups.ByFolder(ctx, job.Folder)
	if err != nil {
		return
	}
	cfg := r.Config()
	text := fmt.Sprintf("%s could not answer: the assistant failed several times (%s). Please try again later.", cfg.AssistantName, failure.Redact(firstLine(runErr.Error(), 200)))
	var top int64
	if rf := (*runFailed)(nil); errors.As(runErr, &rf) {
		top = rf.top
	}
	if err := r.Messages.Answer(ctx, r.Outbox, messages.Answer{ReplyTo: g.JID, Text: text, Kind: outbox.KindNotice, Chat: g.JID, UpTo: top}); err != nil {
		r.Log.Error().Err(err).Str("group", g.Folder).Msg("tell the group its run failed")
	}
}
