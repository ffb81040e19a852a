// Package alerts turns violations (blocked actions of sandboxed agents, and
// refused IPC files) into the group's audit log, a SQLite audit table and
// immediate alerts to the main group, sent through a durable outbox.
package alerts

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/rs/zerolog"
)

// MainChat names the main group's folder and chat; ok is false while no
// main group is registered.
type MainChat interface {
	MainChat(ctx context.Context) (folder, jid string, ok bool)
}

// Reporter records violations and raises alerts about them.
type Reporter struct {
	db        *store.DB
	groupsDir string
	out       *outbox.Outbox
	log       zerolog.Logger
	main      MainChat
	cooldown  time.Duration
	now       func() time.Time

	wake    chan struct{} // capacity 1: a cooldown window got a repeat
	fileMu  sync.Mutex    // one writer of security.jsonl files at a time
	toFlush atomic.Bool   // RecordTx ran since the last Flush
	capSpan time.Duration // what MaxPerMinute counts over: a minute (shorter in tests)

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
func NewReporter(db *store.DB, groupsDir string, out *outbox.Outbox, main MainChat, cooldown time.Duration, clock func() time.Time, log zerolog.Logger) *Reporter {
	if clock == nil {
		clock = time.Now
	}
	return &Reporter{
		db: db, groupsDir: groupsDir, out: out, log: log, main: main, cooldown: cooldown, now: clock,
		wake: make(chan struct{}, 1), capSpan: time.Minute,
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
	var (
		id     int64
		folded bool
	)
	// Do: a violation is what fills a disk (a run over its disk limit),
	// and its record must not be lost to it.
	err := r.db.Do(ctx, func(tx *store.Tx) error {
		var err error
		id, v, folded, err = r.recordTx(ctx, tx, v, alert)
		return err
	})
	if err != nil {
		return fmt.Errorf("alerts: record violation of group %s: %w", v.Group, err)
	}
	if folded {
		r.poke()
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
func (r *Reporter) RecordTx(ctx context.Context, tx *store.Tx, v security.Violation, alert bool) error {
	r.toFlush.Store(true)
	_, _, _, err := r.recordTx(ctx, tx, v, alert)
	return err
}

// Flush follows the commit of transactions that called RecordTx: it
// writes their audit lines and wakes the summaries (the outbox wakes by
// itself). With no RecordTx since the last Flush it does nothing.
func (r *Reporter) Flush(ctx context.Context) error {
	if !r.toFlush.Swap(false) {
		return nil
	}
	r.poke()
	// As at a start: this may meet rows of a crashed run, or of a Report
	// writing its own line; the check for a line already there keeps each
	// line once.
	return r.replayLog(ctx)
}

// recordTx inserts v's audit row and raises its alert (or folds it into
// its group's window); it returns the row, v as recorded, and whether the
// alert was folded.
func (r *Reporter) recordTx(ctx context.Context, tx *store.Tx, v security.Violation, alert bool) (int64, security.Violation, bool, error) {
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
		if _, err := r.out.AddressTx(ctx, tx, mainJID); err != nil {
			return 0, v, false, err
		}
	}
	folded, err := r.raiseTx(ctx, tx, v, chat)
	return id, v, folded, err
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

// Kick addresses alerts raised while there was no main group to the main
// group's chat, if there is one now. The daemon calls it after any change
// to the registered groups.
func (r *Reporter) Kick(ctx context.Context) error {
	_, jid, ok := r.main.MainChat(ctx)
	if !ok {
		return nil
	}
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("alerts: begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := r.out.AddressTx(ctx, tx, jid); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("alerts: commit: %w", err)
	}
	return nil
}
