package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// What the outbox does when a send fails: back off and retry, or give the
// message up (undeliverable, or failing too long) and tell the main group.

// failed records a failed attempt and sets the chat's backoff.
func (o *Outbox) failed(ctx context.Context, chat string, st *chatState, id int64, err error) error {
	if ctx.Err() != nil {
		return ctx.Err() // shutting down: not the channel's fault
	}
	if id != 0 {
		// An outage (ErrUnavailable) does not start the give-up clock.
		var first any
		if !errors.Is(err, channel.ErrUnavailable) {
			first = time.Now().UnixNano()
		}
		if _, uerr := o.db.ExecContext(ctx,
			`UPDATE outbox SET attempts = attempts + 1, last_error = ?,
			 first_error_at = COALESCE(first_error_at, ?) WHERE id = ?`, err.Error(), first, id); uerr != nil {
			o.log.Warn().Err(uerr).Int64("id", id).Msg("outbox: recording failed attempt")
		}
	}
	o.mu.Lock()
	st.fails++
	wait := o.MinBackoff << min(st.fails-1, 30)
	if wait > o.MaxBackoff || wait <= 0 {
		wait = o.MaxBackoff
	}
	st.retryAt = time.Now().Add(wait)
	o.mu.Unlock()
	o.log.Warn().Err(err).Str("chat", chat).Int64("id", id).Dur("retry_in", wait).Msg("outbox: send failed; will retry")
	return err
}

// hopeless says whether a failed send should not be retried: the channel
// says it never can succeed, or it has failed for an unexplained reason
// since longer than GiveUpAfter.
func (o *Outbox) hopeless(err error, firstFail sql.NullInt64) bool {
	switch {
	case errors.Is(err, channel.ErrUndeliverable):
		return true
	case errors.Is(err, channel.ErrUnavailable), !firstFail.Valid:
		return false
	}
	return time.Since(time.Unix(0, firstFail.Int64)) >= o.GiveUpAfter
}

// giveUp marks row id failed and, the first time in a while for this chat,
// queues a notice to the main group saying so, in one transaction.
func (o *Outbox) giveUp(ctx context.Context, chat string, id int64, cause error) error {
	ctx = context.WithoutCancel(ctx)
	now := time.Now()
	tx, err := o.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("outbox: begin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx,
		`UPDATE outbox SET failed_at = ?, attempts = attempts + 1, last_error = ? WHERE id = ?`,
		now.UnixNano(), cause.Error(), id); err != nil {
		return fmt.Errorf("outbox: mark message %d failed: %w", id, err)
	}
	var told int
	if err := tx.QueryRowContext(ctx,
		`SELECT count(*) FROM outbox WHERE chat_jid = ? AND id != ? AND failed_at >= ?`,
		chat, id, now.Add(-tellAgain).UnixNano()).Scan(&told); err != nil {
		return fmt.Errorf("outbox: look up earlier failures in %s: %w", chat, err)
	}
	notice := false
	if told == 0 && o.main != nil {
		_, mainJID, ok := o.main.MainChat(ctx)
		if !ok || mainJID != chat { // never about the main chat to itself
			to := sql.NullString{String: mainJID, Valid: ok} // NULL: waits for a main group
			if _, err := o.enqueueTx(ctx, tx, to, undeliveredText(chat, cause), KindNotice, nil); err != nil {
				return err
			}
			notice = true
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: commit failure of message %d: %w", id, err)
	}
	o.log.Error().Err(cause).Str("chat", chat).Int64("id", id).Bool("main_told", notice).
		Msg("outbox: message dropped, it cannot be delivered; later messages to this chat are still sent")
	return nil
}

// undeliveredText is the main group's notice about a dropped message.
func undeliveredText(chat string, cause error) string {
	return fmt.Sprintf("[nanoclawd] A message to %s could not be delivered and was dropped: %v. "+
		"Later messages to that chat are still tried (further failures there are not reported for %s). "+
		"If the group is gone or the assistant was removed from it, unregister it with `nanoclawd groups remove`.",
		chat, cause, tellAgain)
}

// MessageKey is the Outgoing.ID of outbox row id: the install id (random,
// made with the database) and the row, so it is the same at every resend
// of the row, also after a crash, and never repeats after nanoclaw.db is
// reset.
func MessageKey(install string, id int64) string {
	return install + "-" + strconv.FormatInt(id, 10)
}

// installID reads the install id once.
func (o *Outbox) installID(ctx context.Context) (string, error) {
	o.installMu.Lock()
	defer o.installMu.Unlock()
	if o.install == "" {
		if err := o.db.QueryRowContext(ctx, `SELECT id FROM install`).Scan(&o.install); err != nil {
			return "", fmt.Errorf("outbox: read the install id: %w", err)
		}
	}
	return o.install, nil
}
