package scheduler

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// Task statuses.
const (
	StatusActive    = "active"
	StatusPaused    = "paused"
	StatusCompleted = "completed"
	StatusCancelled = "cancelled"
)

var (
	// ErrNotFound means no task has the given id.
	ErrNotFound = errors.New("task not found")
	// ErrFinished means the task is completed or cancelled and cannot change.
	ErrFinished = errors.New("task is completed or cancelled")
)

// Task is one scheduled task. The JSON names are those of NanoClaw's
// current_tasks.json, which agents read.
type Task struct {
	ID            string     `json:"id"`
	GroupFolder   string     `json:"groupFolder"`
	ChatJID       string     `json:"chatJid"`
	Prompt        string     `json:"prompt"`
	ScheduleType  string     `json:"schedule_type"`
	ScheduleValue string     `json:"schedule_value"`
	ContextMode   string     `json:"context_mode"`
	Status        string     `json:"status"`
	NextRun       *time.Time `json:"next_run"`
	LastRun       *time.Time `json:"last_run"`
	LastResult    string     `json:"last_result,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
}

// Enqueuer is the per-group queue (runner.Queue): a due task becomes a run
// of its group with isScheduledTask set, and that run calls Scheduler.Done
// when it ends.
type Enqueuer interface {
	EnqueueTask(folder, taskID string)
}

// Observer is told after tasks changed or ran (ipc.Snapshots keeps the
// agents' current_tasks.json files current).
type Observer interface {
	TasksChanged(ctx context.Context)
}

// Querier is a *sql.DB or a *sql.Tx, so task changes can share the
// transaction that records the IPC file asking for them.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Scheduler owns the scheduled_tasks and task_run_logs tables.
type Scheduler struct {
	db       *sql.DB
	loc      *time.Location
	queue    Enqueuer
	observer Observer // may be nil
	log      zerolog.Logger
	now      func() time.Time
	wake     chan struct{}
}

// New returns a scheduler computing schedules in loc, handing due tasks to
// queue and telling observer (nil: no one) of changes. Call Run to start
// firing tasks.
func New(db *sql.DB, loc *time.Location, queue Enqueuer, observer Observer, log zerolog.Logger) *Scheduler {
	if loc == nil {
		loc = time.Local
	}
	return &Scheduler{db: db, loc: loc, queue: queue, observer: observer, log: log,
		now: time.Now, wake: make(chan struct{}, 1)}
}

// NewTask is what schedule_task asks for.
type NewTask struct {
	GroupFolder, ChatJID, Prompt, ScheduleType, ScheduleValue, ContextMode string
}

// Create validates and stores a task through q. Call Changed after the
// transaction commits.
func (s *Scheduler) Create(ctx context.Context, q Querier, nt NewTask) (Task, error) {
	if nt.ContextMode == "" {
		nt.ContextMode = ContextGroup
	}
	if !ValidContextMode(nt.ContextMode) {
		return Task{}, fmt.Errorf("context_mode %q: use group or isolated", nt.ContextMode)
	}
	now := s.now()
	next, err := First(nt.ScheduleType, nt.ScheduleValue, s.loc, now)
	if err != nil {
		return Task{}, err
	}
	t := Task{ID: newID(now), GroupFolder: nt.GroupFolder, ChatJID: nt.ChatJID, Prompt: nt.Prompt,
		ScheduleType: nt.ScheduleType, ScheduleValue: nt.ScheduleValue, ContextMode: nt.ContextMode,
		Status: StatusActive, NextRun: &next, CreatedAt: now}
	_, err = q.ExecContext(ctx, `INSERT INTO scheduled_tasks
		(id, group_folder, chat_jid, prompt, schedule_type, schedule_value, context_mode, status, next_run, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.GroupFolder, t.ChatJID, t.Prompt, t.ScheduleType, t.ScheduleValue, t.ContextMode, t.Status,
		next.UnixMilli(), now.UnixMilli())
	if err != nil {
		return Task{}, fmt.Errorf("store task: %w", err)
	}
	return t, nil
}

func newID(now time.Time) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("task-%d-%s", now.UnixMilli(), hex.EncodeToString(b[:]))
}

const taskColumns = `id, group_folder, chat_jid, prompt, schedule_type, schedule_value, context_mode, status,
	next_run, last_run, COALESCE(last_result, ''), created_at`

func scanTask(row interface{ Scan(...any) error }) (Task, error) {
	var t Task
	var next, last sql.NullInt64
	var created int64
	err := row.Scan(&t.ID, &t.GroupFolder, &t.ChatJID, &t.Prompt, &t.ScheduleType, &t.ScheduleValue,
		&t.ContextMode, &t.Status, &next, &last, &t.LastResult, &created)
	if err != nil {
		return t, err
	}
	t.NextRun, t.LastRun = msPtr(next), msPtr(last)
	t.CreatedAt = time.UnixMilli(created).UTC()
	return t, nil
}

func msPtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := time.UnixMilli(v.Int64).UTC()
	return &t
}

// Get returns one task, or ErrNotFound.
func (s *Scheduler) Get(ctx context.Context, q Querier, id string) (Task, error) {
	t, err := scanTask(q.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM scheduled_tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return t, err
}

// List returns the tasks of folder, or every task when folder is "".
func (s *Scheduler) List(ctx context.Context, folder string) ([]Task, error) {
	return ListTasks(ctx, s.db, folder)
}

// ListTasks is List over q.
func ListTasks(ctx context.Context, q Querier, folder string) ([]Task, error) {
	return queryTasks(ctx, q, `WHERE ? = '' OR group_folder = ? ORDER BY created_at, id`, folder, folder)
}

// Next returns the n active tasks due soonest.
func (s *Scheduler) Next(ctx context.Context, n int) ([]Task, error) {
	return s.query(ctx, `WHERE status = ? AND next_run IS NOT NULL ORDER BY next_run, id LIMIT ?`, StatusActive, n)
}

func (s *Scheduler) query(ctx context.Context, where string, args ...any) ([]Task, error) {
	return queryTasks(ctx, s.db, where, args...)
}

func queryTasks(ctx context.Context, q Querier, where string, args ...any) ([]Task, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+taskColumns+` FROM scheduled_tasks `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	tasks := []Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		tasks = append(tasks, t)
	}
	return tasks, rows.Err()
}

// Pause stops a task from firing until Resume.
func (s *Scheduler) Pause(ctx context.Context, q Querier, id string) error {
	if _, err := s.changeable(ctx, q, id); err != nil {
		return err
	}
	_, err := q.ExecContext(ctx, `UPDATE scheduled_tasks SET status = 'paused' WHERE id = ?`, id)
	return err
}

// Resume re-activates a paused task from now on.
func (s *Scheduler) Resume(ctx context.Context, q Querier, id string) error {
	t, err := s.changeable(ctx, q, id)
	if err != nil {
		return err
	}
	next, err := First(t.ScheduleType, t.ScheduleValue, s.loc, s.now())
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx, `UPDATE scheduled_tasks SET status = 'active', next_run = ? WHERE id = ?`, next.UnixMilli(), id)
	return err
}

// Cancel ends a task for good.
func (s *Scheduler) Cancel(ctx context.Context, q Querier, id string) error {
	if _, err := s.changeable(ctx, q, id); err != nil {
		return err
	}
	_, err := q.ExecContext(ctx, `UPDATE scheduled_tasks SET status = 'cancelled', next_run = NULL WHERE id = ?`, id)
	return err
}

// Update is what update_task may change; nil fields stay.
type Update struct {
	Prompt, ScheduleType, ScheduleValue *string
}

// Update changes a task's prompt or schedule. A new schedule takes effect
// from now.
func (s *Scheduler) Update(ctx context.Context, q Querier, id string, u Update) error {
	t, err := s.changeable(ctx, q, id)
	if err != nil {
		return err
	}
	if u.Prompt != nil {
		t.Prompt = *u.Prompt
	}
	reschedule := u.ScheduleType != nil || u.ScheduleValue != nil
	if u.ScheduleType != nil {
		t.ScheduleType = *u.ScheduleType
	}
	if u.ScheduleValue != nil {
		t.ScheduleValue = *u.ScheduleValue
	}
	next := sql.NullInt64{}
	if t.NextRun != nil {
		next = sql.NullInt64{Int64: t.NextRun.UnixMilli(), Valid: true}
	}
	if reschedule {
		n, err := First(t.ScheduleType, t.ScheduleValue, s.loc, s.now())
		if err != nil {
			return err
		}
		next = sql.NullInt64{Int64: n.UnixMilli(), Valid: true}
	}
	_, err = q.ExecContext(ctx, `UPDATE scheduled_tasks SET prompt = ?, schedule_type = ?, schedule_value = ?, next_run = ?
		WHERE id = ?`, t.Prompt, t.ScheduleType, t.ScheduleValue, next, id)
	return err
}

func (s *Scheduler) changeable(ctx context.Context, q Querier, id string) (Task, error) {
	t, err := s.Get(ctx, q, id)
	if err != nil {
		return t, err
	}
	if t.Status == StatusCompleted || t.Status == StatusCancelled {
		return t, fmt.Errorf("%w: %q is %s", ErrFinished, id, t.Status)
	}
	return t, nil
}

func (s *Scheduler) tasksChanged(ctx context.Context) {
	if s.observer != nil {
		s.observer.TasksChanged(ctx)
	}
}

// Changed re-arms the timer and tells the observer. Call it
// after any committed change made through Create, Pause, Resume, Cancel or
// Update.
func (s *Scheduler) Changed() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run fires due tasks until ctx ends. There is one timer, set to the next
// due task and re-armed whenever something changes.
func (s *Scheduler) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		s.fireDue(ctx)
		wait := s.untilNext(ctx)
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			s.tasksChanged(ctx)
		case <-timer.C:
		}
	}
}

// maxWait bounds one timer so that a wall-clock jump (a laptop waking from
// sleep, an NTP step) is noticed within the hour; it is not a poll.
const maxWait = time.Hour

func (s *Scheduler) untilNext(ctx context.Context) time.Duration {
	var next sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT MIN(next_run) FROM scheduled_tasks WHERE status = 'active'`).Scan(&next)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error().Err(err).Msg("scheduler: read next due task; retrying in a minute")
		}
		return time.Minute
	}
	if !next.Valid {
		return maxWait
	}
	d := time.UnixMilli(next.Int64).Sub(s.now())
	return max(0, min(d, maxWait))
}

// fireDue starts every due task. Its next run is stored before the task is
// handed over, so a crash never starts the same scheduled run twice.
func (s *Scheduler) fireDue(ctx context.Context) {
	now := s.now()
	rows, err := s.db.QueryContext(ctx, `SELECT `+taskColumns+` FROM scheduled_tasks
		WHERE status = 'active' AND next_run IS NOT NULL AND next_run <= ? ORDER BY next_run`, now.UnixMilli())
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error().Err(err).Msg("scheduler: read due tasks")
		}
		return
	}
	var due []Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			s.log.Error().Err(err).Msg("scheduler: read due task")
			continue
		}
		due = append(due, t)
	}
	rows.Close()
	for _, t := range due {
		if err := s.claim(ctx, t, now); err != nil {
			s.log.Error().Err(err).Str("task", t.ID).Msg("scheduler: start task")
			continue
		}
		s.queue.EnqueueTask(t.GroupFolder, t.ID)
	}
	if len(due) > 0 {
		s.tasksChanged(ctx)
	}
}

func (s *Scheduler) claim(ctx context.Context, t Task, now time.Time) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	status, next := StatusActive, sql.NullInt64{}
	n, ok, err := After(t.ScheduleType, t.ScheduleValue, s.loc, *t.NextRun, now)
	switch {
	case err != nil:
		// Only a schedule stored by an older binary can fail here; keep it
		// from firing and say why.
		status = StatusPaused
		_, _ = tx.ExecContext(ctx, `UPDATE scheduled_tasks SET last_result = ? WHERE id = ?`, "Error: "+err.Error(), t.ID)
	case ok:
		next = sql.NullInt64{Int64: n.UnixMilli(), Valid: true}
	default:
		status = StatusCompleted
	}
	if _, err := tx.ExecContext(ctx, `UPDATE scheduled_tasks SET status = ?, next_run = ?, last_run = ? WHERE id = ?`,
		status, next, now.UnixMilli(), t.ID); err != nil {
		return err
	}
	if status == StatusPaused {
		return tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO task_run_logs (task_id, started_at, status) VALUES (?, ?, 'running')`,
		t.ID, now.UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}

// Done records the end of a task's run: its result, or runErr.
func (s *Scheduler) Done(ctx context.Context, taskID, result string, runErr error) error {
	status, summary, errText := "success", result, sql.NullString{}
	if runErr != nil {
		status, summary = "error", "Error: "+runErr.Error()
		errText = sql.NullString{String: runErr.Error(), Valid: true}
	}
	now := s.now().UnixMilli()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("record task run: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE scheduled_tasks SET last_result = ? WHERE id = ?`, summary, taskID); err != nil {
		return fmt.Errorf("record task run: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE task_run_logs SET finished_at = ?, status = ?, result = ?, error = ?
		WHERE id = (SELECT MAX(id) FROM task_run_logs WHERE task_id = ? AND status = 'running')`,
		now, status, result, errText, taskID); err != nil {
		return fmt.Errorf("record task run: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record task run: %w", err)
	}
	s.Changed()
	return nil
}

// RunLog is one row of a task's run history.
type RunLog struct {
	TaskID     string
	StartedAt  time.Time
	FinishedAt *time.Time
	Status     string // running | success | error
	Result     string
	Error      string
}

// Runs returns a task's run history, oldest first.
func (s *Scheduler) Runs(ctx context.Context, taskID string) ([]RunLog, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT task_id, started_at, finished_at, status, COALESCE(result, ''), COALESCE(error, '')
		FROM task_run_logs WHERE task_id = ? ORDER BY id`, taskID)
	if err != nil {
		return nil, fmt.Errorf("read run log: %w", err)
	}
	defer rows.Close()
	var logs []RunLog
	for rows.Next() {
		var l RunLog
		var started int64
		var finished sql.NullInt64
		if err := rows.Scan(&l.TaskID, &started, &finished, &l.Status, &l.Result, &l.Error); err != nil {
			return nil, err
		}
		l.StartedAt, l.FinishedAt = time.UnixMilli(started).UTC(), msPtr(finished)
		logs = append(logs, l)
	}
	return logs, rows.Err()
}
