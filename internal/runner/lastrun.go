package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// LastRun is a group's last finished agent run (the last_runs table).
type LastRun struct {
	Folder   string
	Started  time.Time
	Finished time.Time
	OK       bool
	// Stopped: the daemon's shutdown ended it (OK too: not a failure).
	Stopped bool
	Error   string
	TaskID  string // "" for a message run
}

// runHoursKept is how long a group's hourly run counts are kept.
const runHoursKept = 7 * 24 * time.Hour

// RecordLastRun keeps r as its group's last run unless a run that
// finished later is kept already (a stale outcome never hides a newer
// one), and counts it in the running totals and in its hour (RunCounts),
// forgetting the group's counts older than a week.
func RecordLastRun(ctx context.Context, db *store.DB, r LastRun) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("record the last run of %s: %w", r.Folder, err)
	}
	defer tx.Rollback()
	if _, err = tx.ExecContext(ctx, `INSERT INTO last_runs (folder, started_at, finished_at, ok, stopped, error, task_id)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (folder) DO UPDATE SET started_at = excluded.started_at,
		finished_at = excluded.finished_at, ok = excluded.ok, stopped = excluded.stopped, error = excluded.error, task_id = excluded.task_id
		WHERE excluded.finished_at >= last_runs.finished_at`,
		r.Folder, r.Started.UnixMilli(), r.Finished.UnixMilli(), r.OK, r.Stopped, r.Error, r.TaskID); err != nil {
		return fmt.Errorf("record the last run of %s: %w", r.Folder, err)
	}
	failed, outcome := 0, "ok"
	if !r.OK {
		failed, outcome = 1, "error"
	}
	// Every run counts for /metrics (migrations/0020_counters.sql), also
	// one that finished before the kept last run.
	if _, err = tx.ExecContext(ctx, `INSERT INTO counters (name, key, n) VALUES ('runs', ?, 1)
		ON CONFLICT (name, key) DO UPDATE SET n = n + 1`, outcome); err != nil {
		return fmt.Errorf("count the run of %s: %w", r.Folder, err)
	}
	if _, err = tx.ExecContext(ctx, `INSERT INTO run_hours (folder, hour, runs, failures) VALUES (?, ?, 1, ?)
		ON CONFLICT (folder, hour) DO UPDATE SET runs = runs + 1, failures = failures + excluded.failures`,
		r.Folder, r.Finished.Unix()/3600, failed); err != nil {
		return fmt.Errorf("count the run of %s: %w", r.Folder, err)
	}
	// Only the last day is ever read; a week is kept, so the table stays
	// small in a daemon left alone for months.
	if _, err = tx.ExecContext(ctx, `DELETE FROM run_hours WHERE folder = ? AND hour < ?`,
		r.Folder, r.Finished.Add(-runHoursKept).Unix()/3600); err != nil {
		return fmt.Errorf("prune the run counts of %s: %w", r.Folder, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record the last run of %s: %w", r.Folder, err)
	}
	return nil
}

// RunCount is how many runs of a group ended in a span, and how many of
// them failed.
type RunCount struct{ Runs, Failures int }

// RunCounts counts each group's runs that ended since then (to the hour).
func RunCounts(ctx context.Context, db *store.DB, since time.Time) (map[string]RunCount, error) {
	rows, err := db.QueryContext(ctx, `SELECT folder, SUM(runs), SUM(failures) FROM run_hours WHERE hour >= ? GROUP BY folder`, since.Unix()/3600)
	if err != nil {
		return nil, fmt.Errorf("count runs: %w", err)
	}
	defer rows.Close()
	out := map[string]RunCount{}
	for rows.Next() {
		var folder string
		var c RunCount
		if err := rows.Scan(&folder, &c.Runs, &c.Failures); err != nil {
			return nil, fmt.Errorf("count runs: %w", err)
		}
		out[folder] = c
	}
	return out, rows.Err()
}

// LastRuns returns every group's last run, by folder.
func LastRuns(ctx context.Context, db *store.DB) (map[string]LastRun, error) {
	rows, err := db.QueryContext(ctx, `SELECT folder, started_at, finished_at, ok, stopped, error, task_id FROM last_runs`)
	if err != nil {
		return nil, fmt.Errorf("read last runs: %w", err)
	}
	defer rows.Close()
	out := map[string]LastRun{}
	for rows.Next() {
		var (
			r                 LastRun
			started, finished int64
		)
		if err := rows.Scan(&r.Folder, &started, &finished, &r.OK, &r.Stopped, &r.Error, &r.TaskID); err != nil {
			return nil, fmt.Errorf("read last runs: %w", err)
		}
		r.Started, r.Finished = time.UnixMilli(started), time.UnixMilli(finished)
		out[r.Folder] = r
	}
	return out, rows.Err()
}
