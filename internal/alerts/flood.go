package alerts

// Flood control: in one cooldown a group raises at most alerts.maxPerGroup
// alerts; the rest are counted in its window (alert_windows, alert_pending
// in SQLite) and summed up in one message when the window ends.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/approvals"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// raiseTx queues an alert for v, or counts it into its group's open
// window: in one cooldown a group raises at most MaxPerGroup alerts, one
// per distinct (kind, tool, target); the rest wait for the window's
// summary. It reports whether v was folded.
func (r *Reporter) raiseTx(ctx context.Context, tx *store.Tx, v security.Violation, chat sql.NullString) (bool, error) {
	if r.cooldown <= 0 {
		queued, err := r.enqueueAlertTx(ctx, tx, chat, v)
		return !queued, err
	}
	now := r.now().UnixNano()
	var windowEnd, sent int64
	err := tx.QueryRowContext(ctx, `SELECT window_end, sent FROM alert_windows WHERE grp = ?`, v.Group).Scan(&windowEnd, &sent)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("alerts: read alert window: %w", err)
	}
	if found && now >= windowEnd {
		// The window ended before Run summed it up (the daemon was down):
		// its summary goes first, so counts and order stay right.
		if err := r.summarizeTx(ctx, tx, v.Group, chat); err != nil {
			return false, err
		}
		found = false
	}
	if !found {
		if _, err := tx.ExecContext(ctx, `INSERT INTO alert_windows (grp, window_end, sent) VALUES (?, ?, 0)
			ON CONFLICT (grp) DO UPDATE SET window_end = excluded.window_end, sent = 0`, v.Group, now+int64(r.cooldown)); err != nil {
			return false, fmt.Errorf("alerts: open alert window: %w", err)
		}
		sent = 0
	}
	var alerted int
	err = tx.QueryRowContext(ctx, `SELECT alerted FROM alert_pending WHERE grp = ? AND kind = ? AND tool = ? AND target = ?`,
		v.Group, v.Kind, v.Tool, v.Target).Scan(&alerted)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("alerts: read alert window: %w", err)
	}
	if alerted == 0 && sent < int64(r.maxPerGroup()) {
		queued, err := r.enqueueAlertTx(ctx, tx, chat, v)
		if err != nil {
			return false, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_windows SET sent = sent + 1 WHERE grp = ?`, v.Group); err != nil {
			return false, fmt.Errorf("alerts: count alert: %w", err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO alert_pending (grp, kind, tool, target, alerted, n) VALUES (?, ?, ?, ?, 1, 0)
			ON CONFLICT (grp, kind, tool, target) DO UPDATE SET alerted = 1`, v.Group, v.Kind, v.Tool, v.Target)
		if err != nil {
			return false, fmt.Errorf("alerts: count alert: %w", err)
		}
		return !queued, nil
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO alert_pending (grp, kind, tool, target, alerted, n) VALUES (?, ?, ?, ?, 0, 1)
		ON CONFLICT (grp, kind, tool, target) DO UPDATE SET n = n + 1`, v.Group, v.Kind, v.Tool, v.Target)
	if err != nil {
		return false, fmt.Errorf("alerts: count repeat: %w", err)
	}
	return true, nil
}

func (r *Reporter) maxPerGroup() int {
	if r.MaxPerGroup > 0 {
		return r.MaxPerGroup
	}
	return DefaultMaxPerGroup
}

// summarizeTx queues the summary of what group's window folded, if
// anything, and empties the window's counts.
func (r *Reporter) summarizeTx(ctx context.Context, tx *store.Tx, group string, chat sql.NullString) error {
	rows, err := tx.QueryContext(ctx, `SELECT kind, tool, target, n FROM alert_pending WHERE grp = ? AND n > 0
		ORDER BY kind, tool, n DESC, target`, group)
	if err != nil {
		return fmt.Errorf("alerts: read folded violations: %w", err)
	}
	var folded []foldedCount
	for rows.Next() {
		var f foldedCount
		if err := rows.Scan(&f.kind, &f.tool, &f.target, &f.n); err != nil {
			rows.Close()
			return fmt.Errorf("alerts: read folded violations: %w", err)
		}
		folded = append(folded, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("alerts: read folded violations: %w", err)
	}
	if len(folded) > 0 {
		n, files := 0, 0
		for _, f := range folded {
			n += f.n
			if f.tool == ipcTool {
				files += f.n
			}
		}
		if _, err := r.queueCappedTx(ctx, tx, group, chat, summaryText(group, folded, r.cooldown), outbox.KindSummary, n, files); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM alert_pending WHERE grp = ?`, group); err != nil {
		return fmt.Errorf("alerts: close alert window: %w", err)
	}
	return nil
}

// sendDue queues the summary of every window that ended with folded
// violations, opens a new window for that group with its alerts used up
// (so a continuing flood yields one summary per cooldown), drops windows
// that ended quietly, and returns when the next window with folded
// violations ends.
func (r *Reporter) sendDue(ctx context.Context) (time.Time, error) {
	_, mainJID, haveMain := r.main.MainChat(ctx)
	chat := sql.NullString{String: mainJID, Valid: haveMain}
	now := r.now().UnixNano()
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("alerts: begin: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT grp FROM alert_windows w WHERE window_end <= ?
		AND EXISTS (SELECT 1 FROM alert_pending p WHERE p.grp = w.grp AND p.n > 0) ORDER BY window_end`, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("alerts: read alert windows: %w", err)
	}
	var due []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return time.Time{}, fmt.Errorf("alerts: read alert windows: %w", err)
		}
		due = append(due, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return time.Time{}, fmt.Errorf("alerts: read alert windows: %w", err)
	}
	for _, g := range due {
		if err := r.summarizeTx(ctx, tx, g, chat); err != nil {
			return time.Time{}, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE alert_windows SET window_end = ?, sent = ? WHERE grp = ?`,
			now+int64(r.cooldown), r.maxPerGroup(), g); err != nil {
			return time.Time{}, fmt.Errorf("alerts: reopen alert window: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM alert_pending WHERE grp IN (SELECT grp FROM alert_windows WHERE window_end <= ?)`, now); err != nil {
		return time.Time{}, fmt.Errorf("alerts: drop ended windows: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM alert_windows WHERE window_end <= ?`, now); err != nil {
		return time.Time{}, fmt.Errorf("alerts: drop ended windows: %w", err)
	}
	var next sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(window_end) FROM alert_windows w
		WHERE EXISTS (SELECT 1 FROM alert_pending p WHERE p.grp = w.grp AND p.n > 0)`).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("alerts: read alert windows: %w", err)
	}
	capNext, err := r.sendCappedTx(ctx, tx, chat)
	if err != nil {
		return time.Time{}, err
	}
	if err := tx.Commit(); err != nil {
		return time.Time{}, fmt.Errorf("alerts: commit summaries: %w", err)
	}
	if !next.Valid {
		return capNext, nil
	}
	if t := time.Unix(0, next.Int64); capNext.IsZero() || t.Before(capNext) {
		return t, nil
	}
	return capNext, nil
}

// enqueueAlertTx queues v's own alert, or counts it for the cap's summary
// when its group used its minute (cap.go); it reports whether it queued.
// One for a refusal that a rule of the group's override could allow ends
// with a code the owner can answer from the main chat (approvals).
func (r *Reporter) enqueueAlertTx(ctx context.Context, tx *store.Tx, chat sql.NullString, v security.Violation) (bool, error) {
	files := 0
	if v.Tool == ipcTool {
		files = 1
	}
	ok, err := r.roomTx(ctx, tx, v.Group)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, r.capTx(ctx, tx, v.Group, 1, files)
	}
	text := alertText(v)
	code, err := approvals.IssueTx(ctx, tx, v, r.now())
	if err != nil {
		return false, err
	}
	if code != "" {
		text += "\n" + approvals.Line(code, show(v.Group, maxGroup))
	}
	id, err := r.enqueueTx(ctx, tx, chat, text, outbox.KindAlert)
	if err != nil {
		return false, err
	}
	return true, r.usedTx(ctx, tx, v.Group, id)
}

// ipcTool is the tool of a refused IPC file's violation.
const ipcTool = "ipc"
