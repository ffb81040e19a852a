// Package alerts turns violations (blocked actions of sandboxed agents, and
// refused IPC files) into the group's audit log, a SQLite audit table and
// immediate alerts to the main group, sent through a durable outbox.
package alerts

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/rs/zerolog"
)

// MainChat names the main group's folder and chat; ok is false while no
// main group is registered.
type MainChat interface {
	MainChat(ctx context.Context) (folder, jid string, ok bool)
}

// Reporter records violations and raises alerts about them.
type Reporter struct {
	db        *sql.DB
	groupsDir string
	out       *outbox.Outbox
	log       zerolog.Logger
	main      MainChat
	cooldown  time.Duration
	now       func() time.Time

	wake    chan struct{} // capacity 1: a cooldown window got a repeat
	fileMu  sync.Mutex    // one writer of security.jsonl files at a time
	toFlush atomic.Bool   // RecordTx ran since the last Flush

	// MaxPerGroup is how many alerts one group may raise in a cooldown
	// window (DefaultMaxPerGroup when 0); the rest go into one summary.
	MaxPerGroup int
}

// DefaultMaxPerGroup is alerts.maxPerGroup's default.
const DefaultMaxPerGroup = 3

// NewReporter returns a Reporter that writes audit lines under groupsDir,
// audit rows and alerts into db, and queues alerts on out for the chat of
// the main group as main reports it. Repeats of a (group, kind, target)
// within cooldown are folded into one summary; cooldown 0 alerts every
// violation. clock is time.Now when nil; log gets what fails in Run.
func NewReporter(db *sql.DB, groupsDir string, out *outbox.Outbox, main MainChat, cooldown time.Duration, clock func() time.Time, log zerolog.Logger) *Reporter {
	if clock == nil {
		clock = time.Now
	}
	return &Reporter{
		db: db, groupsDir: groupsDir, out: out, log: log, main: main, cooldown: cooldown, now: clock,
		wake: make(chan struct{}, 1),
	}
}

// Report records v and, for a group other than the main one, raises an
// alert to the main chat. The audit row and the queued alert are committed
// in one transaction, so an alert raised is sent even if the daemon dies
// right after. The security.jsonl line is written after the commit; one
// missed by a crash is written by the next Run.
func (r *Reporter) Report(ctx context.Context, v security.Violation) error {
	return r.record(ctx, v, true)
}

func (r *Reporter) record(ctx context.Context, v security.Violation, alert bool) error {
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("alerts: begin: %w", err)
	}
	defer tx.Rollback()
	id, v, folded, err := r.recordTx(ctx, tx, v, alert)
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("alerts: commit violation of group %s: %w", v.Group, err)
	}
	if folded {
		r.poke()
	} else {
		r.out.Wake()
	}
	return r.logLine(ctx, id, v, false)
}

// RecordTx is Report (alert true), or a record in the audit trail only
// (alert false: a refused IPC file that is malformed rather than an attempt
// to cross a boundary), inside the
// caller's transaction, for a caller whose own record must commit with
// the violation's: the IPC journal, so that a refused file is audited and
// alerted exactly once, even across a kill -9. After tx commits the caller
// calls Flush.
func (r *Reporter) RecordTx(ctx context.Context, tx *sql.Tx, v security.Violation, alert bool) error {
	r.toFlush.Store(true)
	_, _, _, err := r.recordTx(ctx, tx, v, alert)
	return err
}

// Flush follows the commit of transactions that called RecordTx: it
// writes their audit lines and wakes the outbox and the summaries. With no
// RecordTx since the last Flush it does nothing.
func (r *Reporter) Flush(ctx context.Context) error {
	if !r.toFlush.Swap(false) {
		return nil
	}
	r.out.Wake()
	r.poke()
	// As at a start: this may meet rows of a crashed run, or of a Report
	// writing its own line; the check for a line already there keeps each
	// line once.
	return r.replayLog(ctx)
}

// recordTx inserts v's audit row and raises its alert (or folds it into
// its group's window); it returns the row, v as recorded, and whether the
// alert was folded.
func (r *Reporter) recordTx(ctx context.Context, tx *sql.Tx, v security.Violation, alert bool) (int64, security.Violation, bool, error) {
	if v.Time.IsZero() {
		v.Time = r.now()
	}
	v.Time = v.Time.UTC()
	v = sanitize(v)
	res, err := tx.ExecContext(ctx,
		`INSERT INTO violations (time, grp, kind, tool, target, detail, action, rule) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		v.Time.UnixNano(), v.Group, v.Kind, v.Tool, v.Target, v.Detail, v.Action, v.Rule)
	if err != nil {
		return 0, v, false, fmt.Errorf("alerts: record violation of group %s: %w", v.Group, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, v, false, fmt.Errorf("alerts: record violation: %w", err)
	}
	if !alert {
		return id, v, false, nil
	}
	mainFolder, mainJID, haveMain := r.main.MainChat(ctx)
	if haveMain && v.Group == mainFolder {
		return id, v, false, nil
	}
	chat := sql.NullString{String: mainJID, Valid: haveMain}
	if haveMain {
		if _, err := outbox.AddressTx(ctx, tx, mainJID); err != nil {
			return 0, v, false, err
		}
	}
	folded, err := r.raiseTx(ctx, tx, v, chat)
	return id, v, folded, err
}

// raiseTx queues an alert for v, or counts it into its group's open
// window: in one cooldown a group raises at most MaxPerGroup alerts, one
// per distinct (kind, tool, target); the rest wait for the window's
// summary. It reports whether v was folded.
func (r *Reporter) raiseTx(ctx context.Context, tx *sql.Tx, v security.Violation, chat sql.NullString) (bool, error) {
	if r.cooldown <= 0 {
		_, err := enqueueTx(ctx, tx, chat, alertText(v), outbox.KindAlert)
		return false, err
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
		if _, err := enqueueTx(ctx, tx, chat, alertText(v), outbox.KindAlert); err != nil {
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
		return false, nil
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
func (r *Reporter) summarizeTx(ctx context.Context, tx *sql.Tx, group string, chat sql.NullString) error {
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
		if _, err := enqueueTx(ctx, tx, chat, summaryText(group, folded, r.cooldown), outbox.KindSummary); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM alert_pending WHERE grp = ?`, group); err != nil {
		return fmt.Errorf("alerts: close alert window: %w", err)
	}
	return nil
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
		r.log.Error().Err(err).Msg("alerts: writing missed audit lines failed")
	}
	if err := r.Kick(ctx); err != nil {
		r.log.Error().Err(err).Msg("alerts: addressing waiting alerts failed")
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, err := r.sendDue(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.log.Error().Err(err).Msg("alerts: sending alert summaries failed; retrying")
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

// sendDue queues the summary of every window that ended with folded
// violations, opens a new window for that group with its alerts used up
// (so a continuing flood yields one summary per cooldown), drops windows
// that ended quietly, and returns when the next window with folded
// violations ends.
func (r *Reporter) sendDue(ctx context.Context) (time.Time, error) {
	_, mainJID, haveMain := r.main.MainChat(ctx)
	chat := sql.NullString{String: mainJID, Valid: haveMain}
	now := r.now().UnixNano()
	tx, err := r.db.BeginTx(ctx, nil)
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
	if err := tx.Commit(); err != nil {
		return time.Time{}, fmt.Errorf("alerts: commit summaries: %w", err)
	}
	if len(due) > 0 {
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
	_, jid, ok := r.main.MainChat(ctx)
	if !ok {
		return nil
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("alerts: begin: %w", err)
	}
	defer tx.Rollback()
	n, err := outbox.AddressTx(ctx, tx, jid)
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
func (r *Reporter) logLine(ctx context.Context, id int64, v security.Violation, replay bool) error {
	r.fileMu.Lock()
	defer r.fileMu.Unlock()
	var logged int
	if err := r.db.QueryRowContext(ctx, `SELECT logged FROM violations WHERE id = ?`, id).Scan(&logged); err != nil {
		return fmt.Errorf("alerts: read violation %d: %w", id, err)
	}
	if logged != 0 {
		return nil
	}
	if err := r.appendLine(v, replay); err != nil {
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

func (r *Reporter) appendLine(v security.Violation, replay bool) error {
	if groups.ValidFolder(v.Group) != nil {
		return fmt.Errorf("alerts: audit line for %q: %w", v.Group, errBadFolder)
	}
	l := layout.New("", r.groupsDir)
	dir := l.GroupLogs(v.Group)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("alerts: create %s: %w", dir, err)
	}
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("alerts: encode violation: %w", err)
	}
	path := l.SecurityLog(v.Group)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("alerts: open audit log: %w", err)
	}
	line = append(line, '\n')
	if replay && endsWith(f, line) {
		// Written before a crash that came before the row was marked: the
		// line (its time has nanoseconds) is there already.
		return f.Close()
	}
	if _, err := f.Write(line); err != nil {
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

// auditTail is how much of an audit log's end replay looks at for a line
// already written; a crash leaves at most the lines in flight unmarked.
const auditTail = 256 << 10

// endsWith tells whether line is among the last auditTail bytes of f.
func endsWith(f *os.File, line []byte) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	off := max(fi.Size()-auditTail, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return false
	}
	return bytes.Contains(buf, line)
}

// replayLog writes the audit lines of rows a crash left unwritten.
func (r *Reporter) replayLog(ctx context.Context) error {
	rows, err := r.db.QueryContext(ctx,
		`SELECT id, time, grp, kind, tool, target, detail, action, rule FROM violations WHERE logged = 0 ORDER BY id`)
	if err != nil {
		return fmt.Errorf("alerts: read unwritten audit rows: %w", err)
	}
	type row struct {
		id int64
		v  security.Violation
	}
	var todo []row
	for rows.Next() {
		var (
			x  row
			ns int64
		)
		if err := rows.Scan(&x.id, &ns, &x.v.Group, &x.v.Kind, &x.v.Tool, &x.v.Target, &x.v.Detail, &x.v.Action, &x.v.Rule); err != nil {
			rows.Close()
			return fmt.Errorf("alerts: read unwritten audit rows: %w", err)
		}
		x.v.Time = time.Unix(0, ns).UTC()
		todo = append(todo, x)
	}
	rows.Close()
	var errs []error
	for _, x := range todo {
		if err := r.logLine(ctx, x.id, x.v, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
