package runner

import (
	"context"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/rs/zerolog"
)

// Ledger is what the runner keeps in SQLite about agents: the mark of
// every running agent (agent_marks), so that the next start can end what
// a killed daemon's agents left running (a kill -9 of the daemon takes
// each agent with it, but not its children), and each group's last run.
type Ledger struct{ db *store.DB }

// NewLedger returns the ledger kept in db (migrated by store.Open).
func NewLedger(db *store.DB) *Ledger { return &Ledger{db: db} }

// RecordLastRun keeps r as its group's last run.
func (l *Ledger) RecordLastRun(ctx context.Context, r LastRun) error {
	return RecordLastRun(ctx, l.db, r)
}

// Mark notes the running agent of folder whose process group is pid. It
// returns the group id to Unmark, 0 when nothing was recorded (no mark on
// this system).
func (l *Ledger) Mark(ctx context.Context, folder string, pid int) (int, error) {
	mark, ok := MarkOf(pid)
	if !ok {
		return 0, nil
	}
	if _, err := l.db.ExecContext(ctx, `INSERT OR REPLACE INTO agent_marks (pgid, folder, start, boot_id) VALUES (?, ?, ?, ?)`,
		mark.PGID, folder, mark.Start, mark.BootID); err != nil {
		return 0, fmt.Errorf("runner: record the process group of %s's agent: %w", folder, err)
	}
	return mark.PGID, nil
}

// Unmark drops the mark of an agent that ended (pgid from Mark).
func (l *Ledger) Unmark(ctx context.Context, pgid int) error {
	if pgid == 0 {
		return nil
	}
	if _, err := l.db.ExecContext(ctx, `DELETE FROM agent_marks WHERE pgid = ?`, pgid); err != nil {
		return fmt.Errorf("runner: forget agent process group %d: %w", pgid, err)
	}
	return nil
}

// KillLeftovers ends what agents of a previous daemon left running and
// forgets their marks. Call it at start, before any agent runs.
func (l *Ledger) KillLeftovers(ctx context.Context, log zerolog.Logger) error {
	rows, err := l.db.QueryContext(ctx, `SELECT pgid, folder, start, boot_id FROM agent_marks`)
	if err != nil {
		return fmt.Errorf("runner: read agent marks: %w", err)
	}
	var marks []Mark
	var folders []string
	for rows.Next() {
		var mk Mark
		var folder string
		if err := rows.Scan(&mk.PGID, &folder, &mk.Start, &mk.BootID); err != nil {
			rows.Close()
			return fmt.Errorf("runner: read agent marks: %w", err)
		}
		marks, folders = append(marks, mk), append(folders, folder)
	}
	rows.Close()
	for i, mk := range marks {
		if n := KillLeftovers(mk); n > 0 {
			log.Warn().Str("group", folders[i]).Int("processes", n).Msg("ended processes a previous agent left running")
		}
	}
	if _, err := l.db.ExecContext(ctx, `DELETE FROM agent_marks`); err != nil {
		return fmt.Errorf("runner: clear agent marks: %w", err)
	}
	return nil
}
