package messages

import (
	"context"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Answer is what one answer changes: a text to send (if any) and the
// messages of a chat it answers (up to UpTo, if any).
type Answer struct {
	ReplyTo string // the chat the text goes to
	Text    string // "" sends nothing
	Kind    string // an outbox kind
	Chat    string // the chat whose cursor moves
	UpTo    int64  // 0 moves no cursor
}

// Answer queues a's text on out and moves the cursor in one transaction:
// an answer and the position it answers move together, so a crash neither
// loses nor repeats a reply.
func (s *Store) Answer(ctx context.Context, out *outbox.Outbox, a Answer) error {
	// Do: a full disk gives up the daemon's reserve rather than the answer.
	err := s.db.Do(ctx, func(tx *store.Tx) error {
		if err := AnswerTx(ctx, tx, out, a); err != nil {
			return err
		}
		tx.OnCommit(s.wakeIndex)
		return nil
	})
	if err != nil {
		return fmt.Errorf("messages: commit the answer to %s: %w", a.Chat, err)
	}
	return nil
}

// AnswerTx does Answer's work inside the caller's transaction.
func AnswerTx(ctx context.Context, tx *store.Tx, out *outbox.Outbox, a Answer) error {
	if a.Text != "" {
		id, err := out.EnqueueTx(ctx, tx, a.ReplyTo, a.Text, a.Kind)
		if err != nil {
			return err
		}
		// The agent's answers are kept for search_history; the daemon's
		// own notices are not the assistant's words.
		if a.Kind == outbox.KindReply {
			if err := recordAnswerTx(ctx, tx, a.ReplyTo, id, a.Text); err != nil {
				return err
			}
		}
	}
	if a.UpTo > 0 {
		return setCursorTx(ctx, tx, a.Chat, a.UpTo)
	}
	return nil
}

// setCursorTx marks the chat's messages up to seq answered; the cursor
// never moves back.
func setCursorTx(ctx context.Context, tx *store.Tx, chat string, seq int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO cursors (chat_jid, answered_seq) VALUES (?, ?)
		ON CONFLICT (chat_jid) DO UPDATE SET answered_seq = max(answered_seq, excluded.answered_seq)`, chat, seq)
	if err != nil {
		return fmt.Errorf("messages: move the cursor of %s: %w", chat, err)
	}
	return nil
}
