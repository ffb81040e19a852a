package messages

// The search index's mark (migration 0016): every message up to
// messages_fts_mark is in the FTS5 index, none after it. Storing a message
// writes nothing to the index; Index moves the mark over new messages a
// batch per transaction, so the cost FTS5 pays at each commit is paid once
// per batch rather than once per message stored.

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
)

// indexBatch bounds the messages one transaction indexes, so that it
// holds the write lock a few milliseconds at most.
const indexBatch = 128

// indexDelay is the pause in the messages that the index waits for,
// indexMaxWait the longest it waits for one.
const (
	indexDelay   = 200 * time.Millisecond
	indexMaxWait = 5 * time.Second
)

// wakeIndex tells RunIndex a message waits to be indexed (after its commit).
func (s *Store) wakeIndex() {
	select {
	case s.pending <- struct{}{}:
	default:
	}
}

// Index indexes every message stored so far.
func (s *Store) Index(ctx context.Context) error {
	for {
		n, err := s.indexBatch(ctx)
		if err != nil || n < indexBatch {
			return err
		}
	}
}

// indexBatch indexes up to indexBatch messages after the mark and moves
// the mark past them, in one transaction: a kill at any moment leaves
// each message indexed once or not yet, never twice.
func (s *Store) indexBatch(ctx context.Context) (int, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("messages: index: %w", err)
	}
	defer tx.Rollback()
	var mark, upTo, n int64
	err = tx.QueryRowContext(ctx, `SELECT m.seq, COALESCE(max(b.seq), m.seq), count(b.seq) FROM messages_fts_mark m
		LEFT JOIN (SELECT seq FROM messages WHERE seq > (SELECT seq FROM messages_fts_mark) ORDER BY seq LIMIT ?) b`, indexBatch).Scan(&mark, &upTo, &n)
	if err != nil || n == 0 {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO messages_fts (rowid, text, media)
		SELECT seq, text, media FROM messages WHERE seq > ? AND seq <= ?`, mark, upTo); err != nil {
		return 0, fmt.Errorf("messages: index: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE messages_fts_mark SET seq = ?`, upTo); err != nil {
		return 0, fmt.Errorf("messages: index: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("messages: index: %w", err)
	}
	return int(n), nil
}

// RunIndex indexes messages once they stop coming for indexDelay (or
// after indexMaxWait of a steady stream), so that a burst is stored without
// the index's work in between; whatever a crash left behind the mark is
// indexed at once. A search never waits for it: it indexes first.
func (s *Store) RunIndex(ctx context.Context, log zerolog.Logger) error {
	s.wakeIndex()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.pending:
		}
		quiet := time.NewTimer(indexDelay)
		limit := time.NewTimer(indexMaxWait)
	gather:
		for {
			select {
			case <-ctx.Done():
				quiet.Stop()
				limit.Stop()
				return nil
			case <-s.pending:
				quiet.Reset(indexDelay)
			case <-quiet.C:
				break gather
			case <-limit.C:
				break gather
			}
		}
		quiet.Stop()
		limit.Stop()
		if err := s.Index(ctx); err != nil && ctx.Err() == nil {
			// Not indexed yet, and searched all the same (Search
			// indexes first); the next message tries again.
			log.Warn().Err(err).Msg("messages: search index")
		}
	}
}
