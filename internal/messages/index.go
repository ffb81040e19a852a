package messages

// The search index's queue (migration 0016): a message's own transaction
// queues it in messages_fts_pending (a trigger); Index folds the queue into
// the FTS5 index a batch per transaction, so the cost FTS5 pays at each
// commit is paid once per batch rather than once per message.

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// indexBatch bounds the messages one fold indexes, so its transaction
// stays short (a few milliseconds).
const indexBatch = 256

// indexDelay lets a burst of messages gather into one fold.
const indexDelay = 50 * time.Millisecond

// wakeIndex tells RunIndex a message waits (after its commit).
func (s *Store) wakeIndex() {
	select {
	case s.pending <- struct{}{}:
	default:
	}
}

// Index folds every pending message into the search index.
func (s *Store) Index(ctx context.Context) error {
	for {
		n, err := s.indexBatch(ctx)
		if err != nil || n < indexBatch {
			return err
		}
	}
}

// indexBatch indexes up to indexBatch pending messages and forgets them,
// in one transaction: a kill at any moment leaves each either pending or
// indexed, never both and never neither.
func (s *Store) indexBatch(ctx context.Context) (int, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("messages: index: %w", err)
	}
	defer tx.Rollback()
	var list string
	var n int
	err = tx.QueryRowContext(ctx, `SELECT json_group_array(seq), count(*) FROM
		(SELECT seq FROM messages_fts_pending ORDER BY seq LIMIT ?)`, indexBatch).Scan(&list, &n)
	if err != nil || n == 0 {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO messages_fts (rowid, text, media)
		SELECT seq, text, media FROM messages WHERE seq IN (SELECT value FROM json_each(?))`, list); err != nil {
		return 0, fmt.Errorf("messages: index: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM messages_fts_pending WHERE seq IN (SELECT value FROM json_each(?))`, list); err != nil {
		return 0, fmt.Errorf("messages: index: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("messages: index: %w", err)
	}
	return n, nil
}

// RunIndex folds pending messages shortly after they are stored (and
// whatever a crash left pending, at once) until ctx ends.
func (s *Store) RunIndex(ctx context.Context, log zerolog.Logger) error {
	s.wakeIndex()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.pending:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(indexDelay):
		}
		if err := s.Index(ctx); err != nil && ctx.Err() == nil {
			// Still pending, and searched all the same (Search folds
			// first); the next message tries again.
			log.Warn().Err(err).Msg("messages: search index")
		}
	}
}
