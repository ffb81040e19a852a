package outbox

// Queuing: a message is a row of the outbox table, written alone
// (Enqueue) or inside the caller's transaction (the ...Tx methods), so
// an answer and what caused it commit together. Either way Run is woken
// once the row is committed (tx.OnCommit): no caller has to remember it.

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Enqueue stores a message for chatJID durably (committed when it returns)
// and wakes Run. kind is one of the Kind constants.
func (o *Outbox) Enqueue(ctx context.Context, chatJID, text, kind string) (int64, error) {
	tx, err := o.db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: begin: %w", err)
	}
	defer tx.Rollback()
	id, err := o.EnqueueTx(ctx, tx, chatJID, text, kind)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("outbox: commit message for %s: %w", chatJID, err)
	}
	return id, nil
}

// EnqueueTx adds a message inside the caller's transaction, so that it is
// queued if and only if the rest of tx commits; Run is woken after the
// commit.
func (o *Outbox) EnqueueTx(ctx context.Context, tx *store.Tx, chatJID, text, kind string) (int64, error) {
	if chatJID == "" {
		return 0, ErrNoChat
	}
	return o.enqueueTx(ctx, tx, sql.NullString{String: chatJID, Valid: true}, text, kind, nil)
}

// EnqueueFileTx is EnqueueTx for a message with a file: text is its
// caption, file.Path the daemon's copy, which the outbox owns from now on
// (removed once the message is sent or given up).
func (o *Outbox) EnqueueFileTx(ctx context.Context, tx *store.Tx, chatJID, text, kind string, file channel.Attachment) (int64, error) {
	if chatJID == "" {
		return 0, ErrNoChat
	}
	return o.enqueueTx(ctx, tx, sql.NullString{String: chatJID, Valid: true}, text, kind, &file)
}

// EnqueueReactionTx queues a reaction with emoji to the chat's message
// messageID, written by sender (who WhatsApp names with it; "" if unknown).
func (o *Outbox) EnqueueReactionTx(ctx context.Context, tx *store.Tx, chatJID, messageID, sender, emoji, kind string) (int64, error) {
	if chatJID == "" {
		return 0, ErrNoChat
	}
	res, err := tx.ExecContext(ctx,
		`INSERT INTO outbox (chat_jid, text, kind, created_at, react_to, react_sender) VALUES (?, ?, ?, ?, ?, ?)`,
		chatJID, emoji, kind, time.Now().UnixNano(), messageID, sender)
	if err != nil {
		return 0, fmt.Errorf("outbox: queue a reaction for %q: %w", chatJID, err)
	}
	tx.OnCommit(o.Wake)
	return res.LastInsertId()
}

// EnqueueForMainTx queues a message for a main group that is not
// registered yet; AddressTx gives it its chat once there is one.
func (o *Outbox) EnqueueForMainTx(ctx context.Context, tx *store.Tx, text, kind string) (int64, error) {
	return o.enqueueTx(ctx, tx, sql.NullString{}, text, kind, nil)
}

// enqueueTx also accepts a NULL chat: a message waiting for a main group.
func (o *Outbox) enqueueTx(ctx context.Context, tx *store.Tx, chat sql.NullString, text, kind string, file *channel.Attachment) (int64, error) {
	var path, name, mime sql.NullString
	if file != nil {
		path, name, mime = sql.NullString{String: file.Path, Valid: true},
			sql.NullString{String: file.Name, Valid: true}, sql.NullString{String: file.MIME, Valid: true}
	}
	res, err := tx.ExecContext(ctx,
		`INSERT INTO outbox (chat_jid, text, kind, created_at, file_path, file_name, file_mime) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		chat, text, kind, time.Now().UnixNano(), path, name, mime)
	if err != nil {
		return 0, fmt.Errorf("outbox: queue message for %q: %w", chat.String, err)
	}
	tx.OnCommit(o.Wake)
	return res.LastInsertId()
}

// AddressTx gives every waiting message for the main group (queued by
// EnqueueForMainTx) its chat, and says how many there were; when there
// were any, Run is woken after the commit.
func (o *Outbox) AddressTx(ctx context.Context, tx *store.Tx, chatJID string) (int64, error) {
	res, err := tx.ExecContext(ctx,
		`UPDATE outbox SET chat_jid = ? WHERE chat_jid IS NULL AND sent_at IS NULL`, chatJID)
	if err != nil {
		return 0, fmt.Errorf("outbox: address waiting alerts to %s: %w", chatJID, err)
	}
	n, err := res.RowsAffected()
	if n > 0 {
		tx.OnCommit(o.Wake)
	}
	return n, err
}

// FoldTx replaces the unsent messages ids (to chatJID) by one new message
// holding text: they are marked sent, as folded into it, and it is queued
// in their place. It returns the new row.
func (o *Outbox) FoldTx(ctx context.Context, tx *store.Tx, ids []int64, chatJID, text, kind string) (int64, error) {
	id, err := o.EnqueueTx(ctx, tx, chatJID, text, kind)
	if err != nil {
		return 0, err
	}
	for _, old := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE outbox SET sent_at = ?, last_error = ? WHERE id = ? AND sent_at IS NULL`,
			time.Now().UnixNano(), fmt.Sprintf("folded into message %d", id), old); err != nil {
			return 0, fmt.Errorf("outbox: fold message %d: %w", old, err)
		}
	}
	return id, nil
}
