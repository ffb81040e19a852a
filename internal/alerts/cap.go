package alerts

// The cap: whatever alerts.cooldown and alerts.maxPerGroup say, and
// however many distinct targets a group makes up, at most MaxPerMinute
// alert messages of one group — summaries included — reach the main chat
// in any minute. The count is of what was sent in the last minute (the
// outbox's sent_at) and what is queued still: counting what was queued
// would let a backed-up outbox send two minutes' worth at once. What the
// cap holds back is counted
// (alert_capped) and said in one summary as soon as the group's minute has
// room again; until then the group's further alerts are counted too, so
// the summary always comes before them. Distinct file names defeated the
// per-target folding alone, and on WhatsApp a flood of messages to one
// chat is what gets a number banned.

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// MaxPerMinute is how many alert messages one group may bring to the main
// chat in any minute.
const MaxPerMinute = 10

// roomTx tells whether group may queue one more alert message now: fewer
// than MaxPerMinute sent in the last minute or waiting to be sent, and
// nothing held back waiting for its summary.
func (r *Reporter) roomTx(ctx context.Context, tx *store.Tx, group string) (bool, error) {
	var used, capped int
	err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM alert_sent s JOIN outbox o ON o.id = s.outbox_id
		WHERE s.grp = ? AND o.failed_at IS NULL AND (o.sent_at IS NULL OR o.sent_at > ?)),
		COALESCE((SELECT n FROM alert_capped WHERE grp = ?), 0)`,
		group, r.now().Add(-r.capSpan).UnixNano(), group).Scan(&used, &capped)
	if err != nil {
		return false, fmt.Errorf("alerts: read the alert cap of group %s: %w", group, err)
	}
	return used < MaxPerMinute && capped == 0, nil
}

// usedTx notes that group queued the alert message outbox row id.
func (r *Reporter) usedTx(ctx context.Context, tx *store.Tx, group string, id int64) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO alert_sent (grp, outbox_id) VALUES (?, ?)`, group, id); err != nil {
		return fmt.Errorf("alerts: count alert of group %s: %w", group, err)
	}
	return nil
}

// capTx counts n violations of group (files of them refused IPC files)
// that the cap held back.
func (r *Reporter) capTx(ctx context.Context, tx *store.Tx, group string, n, files int) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO alert_capped (grp, n, files) VALUES (?, ?, ?)
		ON CONFLICT (grp) DO UPDATE SET n = n + excluded.n, files = files + excluded.files`, group, n, files)
	if err != nil {
		return fmt.Errorf("alerts: count capped alerts of group %s: %w", group, err)
	}
	return nil
}

// queueCappedTx queues text, an alert message standing for n violations of
// group (files of them refused IPC files), if the cap has room; otherwise
// it counts them for the cap's summary. It reports whether text was queued.
func (r *Reporter) queueCappedTx(ctx context.Context, tx *store.Tx, group string, chat sql.NullString, text, kind string, n, files int) (bool, error) {
	ok, err := r.roomTx(ctx, tx, group)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, r.capTx(ctx, tx, group, n, files)
	}
	id, err := r.enqueueTx(ctx, tx, chat, text, kind)
	if err != nil {
		return false, err
	}
	return true, r.usedTx(ctx, tx, group, id)
}

// sendCappedTx queues the cap's summary of every group whose minute has
// room again, forgets alert messages sent over a minute ago, and returns
// when to look again for a group still waiting (zero when none waits).
func (r *Reporter) sendCappedTx(ctx context.Context, tx *store.Tx, chat sql.NullString) (time.Time, error) {
	since := r.now().Add(-r.capSpan).UnixNano()
	if _, err := tx.ExecContext(ctx, `DELETE FROM alert_sent WHERE NOT EXISTS (SELECT 1 FROM outbox o
		WHERE o.id = alert_sent.outbox_id AND o.failed_at IS NULL AND (o.sent_at IS NULL OR o.sent_at > ?))`, since); err != nil {
		return time.Time{}, fmt.Errorf("alerts: forget old alert counts: %w", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT c.grp, c.n, c.files, c.note FROM alert_capped c
		WHERE (c.n > 0 OR c.note != '') AND (SELECT count(*) FROM alert_sent s WHERE s.grp = c.grp) < ? ORDER BY c.grp`, MaxPerMinute)
	if err != nil {
		return time.Time{}, fmt.Errorf("alerts: read capped alerts: %w", err)
	}
	type capped struct {
		grp      string
		n, files int
		note     string
	}
	var due []capped
	for rows.Next() {
		var c capped
		if err := rows.Scan(&c.grp, &c.n, &c.files, &c.note); err != nil {
			rows.Close()
			return time.Time{}, fmt.Errorf("alerts: read capped alerts: %w", err)
		}
		due = append(due, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return time.Time{}, fmt.Errorf("alerts: read capped alerts: %w", err)
	}
	for _, c := range due {
		text := c.note
		if c.n > 0 {
			text = strings.TrimPrefix(text+"\n"+cappedText(c.grp, c.n, c.files), "\n")
		}
		id, err := r.enqueueTx(ctx, tx, chat, text, outbox.KindSummary)
		if err != nil {
			return time.Time{}, err
		}
		if err := r.usedTx(ctx, tx, c.grp, id); err != nil {
			return time.Time{}, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM alert_capped WHERE grp = ?`, c.grp); err != nil {
			return time.Time{}, fmt.Errorf("alerts: close capped alerts of group %s: %w", c.grp, err)
		}
	}
	// A group still waiting has its minute full: room comes when its
	// oldest sent message is a minute old, or, while some still wait in
	// the outbox, after they are sent — looked at again in a second.
	var next sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT min(CASE WHEN o.sent_at IS NULL THEN ? ELSE o.sent_at + ? END)
		FROM alert_sent s JOIN alert_capped c ON c.grp = s.grp JOIN outbox o ON o.id = s.outbox_id WHERE c.n > 0 OR c.note != ''`,
		r.now().Add(time.Second).UnixNano(), int64(r.capSpan)).Scan(&next); err != nil {
		return time.Time{}, fmt.Errorf("alerts: read capped alerts: %w", err)
	}
	if !next.Valid {
		return time.Time{}, nil
	}
	return time.Unix(0, next.Int64), nil
}

// cappedText is the cap's summary: how many more violations of group the
// cap held back, and where to see each one.
func cappedText(group string, n, files int) string {
	g := show(group, maxGroup)
	what := fmt.Sprintf("+%d more refused files from %s in the last minute", n, g)
	if files != n {
		what = fmt.Sprintf("+%d more violations from %s in the last minute (%d of them refused IPC files)", n, g, files)
	}
	return fmt.Sprintf("[SANDBOX ALERT] %s: group %q raises more than %d alerts a minute, so the rest are counted here.\n"+
		"Each one: `nanoclawd violations --group %s --since 1h`.", what, g, MaxPerMinute, g)
}

// NoticeTx tells the main chat text about group, once: a change of the
// group's state the owner must hear of (its IPC paused by its own flood).
// It counts against the group's minute like any alert message; when the
// minute is full it goes first in the cap's summary instead, never
// dropped.
func (r *Reporter) NoticeTx(ctx context.Context, tx *store.Tx, group, text string) error {
	_, jid, ok := r.main.MainChat(ctx)
	chat := sql.NullString{String: jid, Valid: ok}
	if ok {
		if _, err := r.out.AddressTx(ctx, tx, jid); err != nil {
			return err
		}
	}
	room, err := r.roomTx(ctx, tx, group)
	if err != nil {
		return err
	}
	if room {
		id, err := r.enqueueTx(ctx, tx, chat, text, outbox.KindAlert)
		if err != nil {
			return err
		}
		return r.usedTx(ctx, tx, group, id)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO alert_capped (grp, note) VALUES (?, ?)
		ON CONFLICT (grp) DO UPDATE SET note = CASE WHEN note = '' THEN excluded.note ELSE note || char(10) || excluded.note END`, group, text)
	if err != nil {
		return fmt.Errorf("alerts: hold a notice of group %s: %w", group, err)
	}
	tx.OnCommit(r.poke) // Run looks for the room it waits for
	return nil
}

// TellOwnerTx queues text for the main chat about no group in particular
// (the disk is full): no group's cap counts it; the caller says it once.
func (r *Reporter) TellOwnerTx(ctx context.Context, tx *store.Tx, text string) error {
	_, jid, ok := r.main.MainChat(ctx)
	if ok {
		if _, err := r.out.AddressTx(ctx, tx, jid); err != nil {
			return err
		}
	}
	_, err := r.enqueueTx(ctx, tx, sql.NullString{String: jid, Valid: ok}, text, outbox.KindAlert)
	return err
}
