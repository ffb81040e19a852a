package scheduler

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
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

// Scheduler owns the scheduled_tasks and task_run_logs tables.
type Scheduler struct {
	db       *store.DB
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
func New(db *store.DB, loc *time.Location, queue Enqueuer, observer Observer, log zerolog.Logger) *Scheduler {
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

// Create validates and stores a task inside tx (the transaction that
// records the IPC file asking for it, say). Call Changed after tx commits;
// so for the other changes.
func (s *Scheduler) Create(ctx context.Context, tx *store.Tx, nt NewTask) (Task, error) {
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
	_, err = tx.ExecContext(ctx, `INSERT INTO scheduled_tasks
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
func (s *Scheduler) Get(ctx context.Context, id string) (Task, error) {
	return scanOne(s.db.QueryRowContext(ctx, selectOne, id), id)
}

const selectOne = `SELECT ` + taskColumns + ` FROM scheduled_tasks WHERE id = ?`

// scanOne reads task id from row, a query of selectOne.
func scanOne(row *sql.Row, id string) (Task, error) {
	t, err := scanTask(row)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return t, err
}

// List returns the tasks of folder, or every task when folder is "".
func (s *Scheduler) List(ctx context.Context, folder string) ([]Task, error) {
	return ListTasks(ctx, s.db, folder)
}

// ListTasks is List over db, for a reader made before the scheduler.
func ListTasks(ctx context.Context, db *store.DB, folder string) ([]Task, error) {
	return queryTasks(ctx, db, `WHERE ? = '' OR group_folder = ? ORDER BY created_at, id`, folder, folder)
}

// Next returns the n active tasks due soonest.
func (s *Scheduler) Next(ctx context.Context, n int) ([]Task, error) {
	return s.query(ctx, `WHERE status = ? AND next_run IS NOT NULL ORDER BY next_run, id LIMIT ?`, StatusActive, n)
}

func (s *Scheduler) query(ctx context.Context, where string, args ...any) ([]Task, error) {
	return queryTasks(ctx, s.db, where, args...)
}

func queryTasks(ctx context.Context, db *store.DB, where string, args ...any) ([]Task, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+taskColumns+` FROM scheduled_tasks `+where, args...)
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
func (s *Scheduler) Pause(ctx context.Context, tx *store.Tx, id string) error {
	if _, err := s.changeable(ctx, tx, id); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE scheduled_tasks SET status = 'paused' WHERE id = ?`, id)
	return err
}

// Resume re-activates a paused task from now on.
func (s *Scheduler) Resume(ctx context.Context, tx *store.Tx, id string) error {
	t, err := s.changeable(ctx, tx, id)
	if err != nil {
		return err
	}
	next, err := First(t.ScheduleType, t.ScheduleValue, s.loc, s.now())
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE scheduled_tasks SET status = 'active', next_run = ? WHERE id = ?`, next.UnixMilli(), id)
	return err
}

// Cancel ends a task for good.
func (s *Scheduler) Cancel(ctx context.Context, tx *store.Tx, id string) error {
	if _, err := s.changeable(ctx, tx, id); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE scheduled_tasks SET status = 'cancelled', next_run = NULL WHERE id = ?`, id)
	return err
}

// Update is what update_task may change; nil fields stay.
type Update struct {
	Prompt, ScheduleType, ScheduleValue *string
}

// Update changes a task's prompt or schedule. A new schedule takes effect
// from now.
func (s *Scheduler) Update(ctx context.Context, tx *store.Tx, id string, u Update) error {
	t, err := s.changeable(ctx, tx, id)
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
	_, err = tx.ExecContext(ctx, `UPDATE scheduled_tasks SET prompt = ?, schedule_type = ?, schedule_value = ?, next_run = ?
		WHERE id = ?`, t.Prompt, t.ScheduleType, t.ScheduleValue, next, id)
	return err
}

// changeable reads task id inside tx, refusing a finished one.
func (s *Scheduler) changeable(ctx context.Context, tx *store.Tx, id string) (Task, error) {
	t, err := scanOne(tx.QueryRowContext(ctx, selectOne, id), id)
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
