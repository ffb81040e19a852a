package mock

import (
	"context"

	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// The parts the router drives. A nil func field panics when called: a
// test that does not expect a call leaves it nil.

// Queue is a router.Queue.
type Queue struct {
	EnqueueMessagesFn func(folder string)
	RunningFn         func(folder string) bool
}

func (q *Queue) EnqueueMessages(folder string) { q.EnqueueMessagesFn(folder) }
func (q *Queue) Running(folder string) bool    { return q.RunningFn(folder) }

// Reporter is a security.Reporter.
type Reporter struct {
	ReportFn func(ctx context.Context, v security.Violation) error
}

func (r *Reporter) Report(ctx context.Context, v security.Violation) error { return r.ReportFn(ctx, v) }

// Tokens is a router.Tokens.
type Tokens struct {
	IssueFn  func(ctx context.Context, folder string) (string, error)
	FinishFn func(ctx context.Context, token string) error
}

func (t *Tokens) Issue(ctx context.Context, folder string) (string, error) {
	return t.IssueFn(ctx, folder)
}
func (t *Tokens) Finish(ctx context.Context, token string) error { return t.FinishFn(ctx, token) }

// Tasks is a router.Tasks.
type Tasks struct {
	GetFn  func(ctx context.Context, id string) (scheduler.Task, error)
	DoneFn func(ctx context.Context, taskID, result string, runErr error) error
}

func (t *Tasks) Get(ctx context.Context, id string) (scheduler.Task, error) { return t.GetFn(ctx, id) }
func (t *Tasks) Done(ctx context.Context, taskID, result string, runErr error) error {
	return t.DoneFn(ctx, taskID, result, runErr)
}

// Ledger is a router.Ledger.
type Ledger struct {
	MarkFn          func(ctx context.Context, folder string, pid int) (int, error)
	UnmarkFn        func(ctx context.Context, pgid int) error
	RecordLastRunFn func(ctx context.Context, r runner.LastRun) error
}

func (l *Ledger) Mark(ctx context.Context, folder string, pid int) (int, error) {
	return l.MarkFn(ctx, folder, pid)
}
func (l *Ledger) Unmark(ctx context.Context, pgid int) error { return l.UnmarkFn(ctx, pgid) }
func (l *Ledger) RecordLastRun(ctx context.Context, r runner.LastRun) error {
	return l.RecordLastRunFn(ctx, r)
}
