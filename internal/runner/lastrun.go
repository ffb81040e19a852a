package runner

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// LastRun is a group's last finished agent run (the last_runs table).
type LastRun struct {
	Folder   string
	Started  time.Time
	Finished time.Time
	OK       bool
	Error    string
	TaskID   string // "" for a message run
}

// RecordLastRun keeps r as its group's last run.
func RecordLastRun(ctx context.Context, db *sql.DB, r LastRun) error {
	_, err := db.ExecContext(ctx, `INSERT INTO last_runs (folder, started_at, finished_at, ok, error, task_id)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (folder) DO UPDATE SET started_at = excluded.started_at,
		finished_at = excluded.finished_at, ok = excluded.ok, error = excluded.error, task_id = excluded.task_id`,
		r.Folder, r.Started.UnixMilli(), r.Finished.UnixMilli(), r.OK, r.Error, r.TaskID)
	if err != nil {
		return fmt.Errorf("record the last run of %s: %w", r.Folder, err)
	}
	return nil
}

// LastRuns returns every group's last run, by folder.
func LastRuns(ctx context.Context, db *sql.DB) (map[string]LastRun, error) {
	rows, err := db.QueryContext(ctx, `SELECT folder, started_at, finished_at, ok, error, task_id FROM last_runs`)
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
		if err := rows.Scan(&r.Folder, &started, &finished, &r.OK, &r.Error, &r.TaskID); err != nil {
			return nil, fmt.Errorf("read last runs: %w", err)
		}
		r.Started, r.Finished = time.UnixMilli(started), time.UnixMilli(finished)
		out[r.Folder] = r
	}
	return out, rows.Err()
}
