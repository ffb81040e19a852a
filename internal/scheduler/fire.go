package scheduler

// Firing: one timer set to the next due task; a due task's next run is
// stored before it is handed to the queue, and Done records how it ended.

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

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
	tx, err := s.db.Begin(ctx)
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
	tx, err := s.db.Begin(ctx)
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
