package messages

// Search over what the chats said and what the assistant answered, through
// messages_fts (migration 0016), which triggers keep in step with the
// messages table in the same transaction as every change to it.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// AssistantSender is the sender of the assistant's own answers as
// RecordAnswerTx stores them.
const AssistantSender = "assistant"

// answerPrefix starts the id of an answer RecordAnswerTx stored: "out-"
// and its outbox row, an id no channel gives.
const answerPrefix = "out-"

// ErrBadQuery wraps a search the full-text index refused for its words:
// the query's fault, which no retry mends, not the database's.
var ErrBadQuery = errors.New("the search index cannot read this query")

// maxFoundText bounds one message's text in a search answer, so that a
// hundred long messages still make a verdict the agent can read.
const maxFoundText = 2000

// RecordAnswerTx stores the assistant's answer text to chat, queued as
// outbox row outboxID, as a message of that chat (is_bot, never part of a
// prompt), inside the caller's transaction: the answer becomes searchable
// exactly when it is queued.
func (s *Store) RecordAnswerTx(ctx context.Context, tx *store.Tx, chat string, outboxID int64, text string) error {
	tx.OnCommit(s.wakeIndex)
	return recordAnswerTx(ctx, tx, chat, outboxID, text)
}

func recordAnswerTx(ctx context.Context, tx *store.Tx, chat string, outboxID int64, text string) error {
	if text == "" || chat == "" {
		return nil
	}
	_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO messages (chat_jid, id, sender, sender_name, text, time, from_me, is_bot)
		VALUES (?, ?, ?, '', ?, ?, 1, 1)`, chat, answerPrefix+strconv.FormatInt(outboxID, 10), AssistantSender, text, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("messages: record the answer to %s: %w", chat, err)
	}
	return nil
}

// Search returns the messages of chat holding every word of s, newest
// first, at most s.Limit, after indexing what is not yet, so that every
// message stored before it is searched. A channel's echo of the
// assistant's own reply (WhatsApp's, is_bot with the channel's id) is left
// out: the answer is there already as RecordAnswerTx stored it.
func (s *Store) Search(ctx context.Context, chat string, q protocol.Search) ([]protocol.Found, error) {
	if err := s.Index(ctx); err != nil {
		return nil, err
	}
	since, until := int64(0), int64(1<<62)
	if !q.Since.IsZero() {
		since = q.Since.UnixMilli()
	}
	if !q.Until.IsZero() {
		until = q.Until.UnixMilli()
	}
	rows, err := s.db.QueryContext(ctx, `SELECT m.id, m.chat_jid, m.sender, CASE WHEN m.sender_name != '' THEN m.sender_name ELSE m.sender END,
			m.time, trim(m.media || ' ' || m.text)
		FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid
		WHERE messages_fts MATCH ? AND m.chat_jid = ? AND m.time >= ? AND m.time < ?
			AND (m.is_bot = 0 OR m.id GLOB 'out-*') AND m.react_to = ''
		ORDER BY m.time DESC, m.seq DESC LIMIT ?`,
		protocol.MatchExpr(q.Words), chat, since, until, q.Limit)
	if store.BadQuery(err) {
		return nil, fmt.Errorf("%w (%w); search for plain words", ErrBadQuery, err)
	}
	if err != nil {
		return nil, fmt.Errorf("messages: search %s: %w", chat, err)
	}
	defer rows.Close()
	found := []protocol.Found{}
	for rows.Next() {
		var f protocol.Found
		var ms int64
		if err := rows.Scan(&f.ID, &f.ChatJID, &f.Sender, &f.SenderName, &ms, &f.Text); err != nil {
			return nil, fmt.Errorf("messages: search %s: %w", chat, err)
		}
		f.Time = time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
		if r := []rune(f.Text); len(r) > maxFoundText {
			f.Text = string(r[:maxFoundText]) + "…"
		}
		found = append(found, f)
	}
	return found, rows.Err()
}
