package alerts

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// MainFunc reports the main group's folder and chat; ok is false while no
// main group is registered.
type MainFunc func(ctx context.Context) (folder, jid string, ok bool)

// Reporter records violations and raises alerts about them.
type Reporter struct {
	db        *sql.DB
	groupsDir string
	out       *Outbox
	main      MainFunc
	cooldown  time.Duration
	now       func() time.Time

	wake   chan struct{} // capacity 1: a cooldown window got a repeat
	fileMu sync.Mutex    // one writer of security.jsonl files at a time
}

// NewReporter returns a Reporter that writes audit lines under groupsDir,
// audit rows and alerts into db, and queues alerts on out for the chat of
// the main group as main reports it. Repeats of a (group, kind, target)
// within cooldown are folded into one summary; cooldown 0 alerts every
// violation. clock is time.Now when nil.
func NewReporter(db *sql.DB, groupsDir string, out *Outbox, main MainFunc, cooldown time.Duration, clock func() time.Time) *Reporter {
	if clock == nil {
		clock = time.Now
	}
	return &Reporter{
		db: db, groupsDir: groupsDir, out: out, main: main, cooldown: cooldown, now: clock,
		wake: make(chan struct{}, 1),
	}
}

// Report records v and, for a group other than the main one, raises an
// alert to the main chat. The audit row and the queued alert are committed
// in one transaction, so an alert raised is sent even if the daemon dies
// right after. The security.jsonl line is written after the commit; one
// missed by a crash is written by the next Run.
func (r *Reporter) Report(ctx context.Context, v Violation) error {
	return r.record(ctx, v, true, nil)
}

// Audit records v in the audit trail only, with no alert: a refused IPC
// file that is malformed rather than an attempt to cross a boundary.
func (r *Reporter) Audit(ctx context.Context, v Violation) error {
	return r.record(ctx, v, false, nil)
}

// RecordOnce is Report (alert true) or Audit (alert false) for a caller
// that may repeat the call after a crash, such as the IPC watcher finishing
// a refused file again after a restart. claim runs inside the transaction
// that records v, before anything else, and marks the caller's key done;
// it returns false when the key was done before, and then nothing is
// recorded. Because the mark and the record commit together, a kill -9 can
// neither double the alert nor lose it.
func (r *Reporter) RecordOnce(ctx context.Context, v Violation, alert bool, claim func(tx *sql.Tx) (bool, error)) error {
	return r.record(ctx, v, alert, claim)
}

func (r *Reporter) record(ctx context.Context, v Violation, alert bool, claim func(tx *sql.Tx) (bool, error)) error {
	if v.Time.IsZero() {
		v.Time = r.now()
	}
	v.Time = v.Time.UTC()
	v = sanitize(v)
	mainFolder, mainJID, haveMain := r.main(ctx)

	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("alerts: begin: %w", err)
	}
	defer tx.Rollback()
	if claim != nil {
		first, err := claim(tx)
		if err != nil {
			return fmt.Errorf("alerts: claim violation of group %s: %w", v.Group, err)
		}
		if !first {
			return nil
		}
	}
	res, err := tx.ExecContext(ctx,
		`INSERT INTO violations (time, grp, kind, tool, target, detail, action) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		v.Time.UnixNano(), v.Group, v.Kind, v.Tool, v.Target, v.Detail, v.Action)
	if err != nil {
		return fmt.Errorf("alerts: record violation of group %s: %w", v.Group, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("alerts: record violation: %w", err)
	}
	folded := false
	if alert && (!haveMain || v.Group != mainFolder) {
		chat := sql.NullString{String: mainJID, Valid: haveMain}
		if haveMain {
			if _, err := retargetTx(ctx, tx, mainJID); err != nil {
				return err
			}
		}
		if folded, err = r.raiseTx(ctx, tx, v, chat); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("alerts: commit violation of group %s: %w", v.Group, err)
	}
	if folded {
		r.poke()
	} else {
		r.out.Wake()
	}
	return r.logLine(ctx, id, v)
}

// raiseTx queues an alert for v, or counts it into the open cooldown
// window of its (group, kind, target). It reports whether v was folded.
func (r *Reporter) raiseTx(ctx context.Context, tx *sql.Tx, v Violation, chat sql.NullString) (bool, error) {
	if r.cooldown <= 0 {
		_, err := enqueueTx(ctx, tx, chat, alertText(v), KindAlert)
		return false, err
	}
	now := r.now().UnixNano()
	var (
		windowEnd, pending int64
		lastTool, lastDet  string
	)
	err := tx.QueryRowContext(ctx,
		`SELECT window_end, pending, last_tool, last_detail FROM alert_cooldowns WHERE grp = ? AND kind = ? AND target = ?`,
		v.Group, v.Kind, v.Target).Scan(&windowEnd, &pending, &lastTool, &lastDet)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("alerts: read cooldown: %w", err)
	}
	if found && now < windowEnd {
		_, err := tx.ExecContext(ctx,
			`UPDATE alert_cooldowns SET pending = pending + 1, last_tool = ?, last_detail = ?, last_time = ?
			 WHERE grp = ? AND kind = ? AND target = ?`,
			v.Tool, v.Detail, v.Time.UnixNano(), v.Group, v.Kind, v.Target)
		if err != nil {
			return false, fmt.Errorf("alerts: count repeat: %w", err)
		}
		return true, nil
	}
	if found && pending > 0 {
		// The window ended before Run sent its summary (the daemon was down):
		// send it first, so counts and order stay right.
		last := Violation{Group: v.Group, Kind: v.Kind, Target: v.Target, Tool: lastTool, Detail: lastDet}
		if _, err := enqueueTx(ctx, tx, chat, summaryText(last, int(pending), r.cooldown), KindSummary); err != nil {
			return false, err
		}
	}
	if _, err := enqueueTx(ctx, tx, chat, alertText(v), KindAlert); err != nil {
		return false, err
	}
	_, err = tx.ExecContext(ctx,
		`INSERT INTO alert_cooldowns (grp, kind, target, window_end, pending) VALUES (?, ?, ?, ?, 0)
		 ON CONFLICT (grp, kind, target) DO UPDATE SET window_end = excluded.window_end, pending = 0,
		   last_tool = '', last_detail = '', last_time = 0`,
		v.Group, v.Kind, v.Target, now+int64(r.cooldown))
	if err != nil {
		return false, fmt.Errorf("alerts: open cooldown: %w", err)
	}
	return false, nil
}

func (r *Reporter) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run sends the summaries of cooldown windows as they end, until ctx ends.
// Windows live in SQLite, so a summary due while the daemon was down is
// sent at the next start. At start it also writes audit lines a crash left
// unwritten and addresses alerts that waited for a main group.
func (r *Reporter) Run(ctx context.Context) error {
	if err := r.replayLog(ctx); err != nil {
		r.out.log.Error().Err(err).Msg("alerts: writing missed audit lines failed")
	}
	if err := r.Kick(ctx); err != nil {
		r.out.log.Error().Err(err).Msg("alerts: addressing waiting alerts failed")
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, err := r.sendDue(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.out.log.Error().Err(err).Msg("alerts: sending alert summaries failed; retrying")
			next = r.now().Add(time.Second)
		}
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(next.Sub(r.now()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// sendDue queues a summary for every window that ended with repeats, opens
// a new window for it (so a continuing flood yields one message per
// cooldown), and returns when the next window with repeats ends.
func (r *Reporter) sendDue(ctx context.Context) (time.Time, error) {
	_, mainJID, haveMain := r.main(ctx)
	chat := sql.NullString{String: mainJID, Valid: haveMain}
	now := r.now().UnixNano()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("alerts: begin: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx,
		`SELECT grp, kind, target, pending, last_tool, last_detail FROM alert_cooldowns
		 WHERE pending > 0 AND window_end <= ? ORDER BY window_end`, now)
	if err != nil {
		return time.Time{}, fmt.Errorf("alerts: read cooldowns: %w", err)
	}
	type due struct {
		v Violation
		n int
	}
	var dues []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.v.Group, &d.v.Kind, &d.v.Target, &d.n, &d.v.Tool, &d.v.Detail); err != nil {
			rows.Close()
			return time.Time{}, fmt.Errorf("alerts: read cooldowns: %w", err)
		}
		dues = append(dues, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return time.Time{}, fmt.Errorf("alerts: read cooldowns: %w", err)
	}
	for _, d := range dues {
		if _, err := enqueueTx(ctx, tx, chat, summaryText(d.v, d.n, r.cooldown), KindSummary); err != nil {
			return time.Time{}, err
		}
		if _, err := tx.ExecContext(ctx,
			`UPDATE alert_cooldowns SET window_end = ?, pending = 0, last_tool = '', last_detail = '', last_time = 0
			 WHERE grp = ? AND kind = ? AND target = ?`,
			now+int64(r.cooldown), d.v.Group, d.v.Kind, d.v.Target); err != nil {
			return time.Time{}, fmt.Errorf("alerts: reopen cooldown: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM alert_cooldowns WHERE pending = 0 AND window_end <= ?`, now); err != nil {
		return time.Time{}, fmt.Errorf("alerts: drop ended cooldowns: %w", err)
	}
	var next sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(window_end) FROM alert_cooldowns WHERE pending > 0`).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("alerts: read cooldowns: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return time.Time{}, fmt.Errorf("alerts: commit summaries: %w", err)
	}
	if len(dues) > 0 {
		r.out.Wake()
	}
	if !next.Valid {
		return time.Time{}, nil
	}
	return time.Unix(0, next.Int64), nil
}

// Kick addresses alerts raised while there was no main group to the main
// group's chat, if there is one now. The daemon calls it after any change
// to the registered groups.
func (r *Reporter) Kick(ctx context.Context) error {
	_, jid, ok := r.main(ctx)
	if !ok {
		return nil
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("alerts: begin: %w", err)
	}
	defer tx.Rollback()
	n, err := retargetTx(ctx, tx, jid)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("alerts: commit: %w", err)
	}
	if n > 0 {
		r.out.Wake()
	}
	return nil
}

// logLine appends v to its group's security.jsonl (fsync'd) and marks the
// row written. The check of the mark under fileMu keeps Run's replay and a
// concurrent Report from writing one row twice.
func (r *Reporter) logLine(ctx context.Context, id int64, v Violation) error {
	r.fileMu.Lock()
	defer r.fileMu.Unlock()
	var logged int
	if err := r.db.QueryRowContext(ctx, `SELECT logged FROM violations WHERE id = ?`, id).Scan(&logged); err != nil {
		return fmt.Errorf("alerts: read violation %d: %w", id, err)
	}
	if logged != 0 {
		return nil
	}
	if err := r.appendLine(v); err != nil {
		if errors.Is(err, errBadFolder) {
			// Nothing will ever fix it; the SQLite row is the record.
			r.db.ExecContext(ctx, `UPDATE violations SET logged = 1 WHERE id = ?`, id)
		}
		return err
	}
	if _, err := r.db.ExecContext(context.WithoutCancel(ctx), `UPDATE violations SET logged = 1 WHERE id = ?`, id); err != nil {
		return fmt.Errorf("alerts: mark violation %d logged: %w", id, err)
	}
	return nil
}

var errBadFolder = errors.New("not a valid group folder name")

func (r *Reporter) appendLine(v Violation) error {
	if groups.ValidFolder(v.Group) != nil {
		return fmt.Errorf("alerts: audit line for %q: %w", v.Group, errBadFolder)
	}
	dir := filepath.Join(r.groupsDir, v.Group, "logs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("alerts: create %s: %w", dir, err)
	}
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("alerts: encode violation: %w", err)
	}
	path := filepath.Join(dir, "security.jsonl")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("alerts: open audit log: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("alerts: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("alerts: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("alerts: close %s: %w", path, err)
	}
	return nil
}

// replayLog writes the audit lines of rows a crash left unwritten.
func (r *Reporter) replayLog(ctx context.Context) error {
	rows, err := r.db.QueryContext(ctx,
		`SELECT id, time, grp, kind, tool, target, detail, action FROM violations WHERE logged = 0 ORDER BY id`)
	if err != nil {
		return fmt.Errorf("alerts: read unwritten audit rows: %w", err)
	}
	type row struct {
		id int64
		v  Violation
	}
	var todo []row
	for rows.Next() {
		var (
			x  row
			ns int64
		)
		if err := rows.Scan(&x.id, &ns, &x.v.Group, &x.v.Kind, &x.v.Tool, &x.v.Target, &x.v.Detail, &x.v.Action); err != nil {
			rows.Close()
			return fmt.Errorf("alerts: read unwritten audit rows: %w", err)
		}
		x.v.Time = time.Unix(0, ns).UTC()
		todo = append(todo, x)
	}
	rows.Close()
	var errs []error
	for _, x := range todo {
		if err := r.logLine(ctx, x.id, x.v); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
