package messages

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Sessions: each group's agent session id, so a run resumes the group's
// conversation. A reset leaves the row, empty, with the time of the reset:
// a run that started before it must not save its old session back when it
// ends (SaveSession), nor take more follow-ups (ResetSince).

// Session returns the group's saved session id ("" for none).
func (s *Store) Session(ctx context.Context, folder string) (string, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT session_id FROM sessions WHERE folder = ?`, folder).Scan(&id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("messages: read the session of %s: %w", folder, err)
	}
	return id, nil
}

// ResetSession makes the group's next run start a fresh agent session and
// reports whether it had one.
func (s *Store) ResetSession(ctx context.Context, folder string) (bool, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("messages: begin: %w", err)
	}
	defer tx.Rollback()
	had, err := resetSessionTx(ctx, tx, folder)
	if err != nil {
		return false, err
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("messages: commit the reset of %s's session: %w", folder, err)
	}
	return had, nil
}

func resetSessionTx(ctx context.Context, tx *store.Tx, folder string) (bool, error) {
	var had string
	err := tx.QueryRowContext(ctx, `SELECT session_id FROM sessions WHERE folder = ?`, folder).Scan(&had)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("messages: read the session of %s: %w", folder, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (folder, session_id, updated_at) VALUES (?, '', ?)
		ON CONFLICT (folder) DO UPDATE SET session_id = '', updated_at = excluded.updated_at`, folder, time.Now().UnixMilli()); err != nil {
		return false, fmt.Errorf("messages: reset the session of %s: %w", folder, err)
	}
	return had != "", nil
}

// ResetSince reports whether the group's session was reset after since.
func (s *Store) ResetSince(ctx context.Context, folder string, since time.Time) (bool, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sessions WHERE folder = ? AND session_id = '' AND updated_at > ?`,
		folder, since.UnixMilli()).Scan(&n); err != nil {
		return false, fmt.Errorf("messages: read the session of %s: %w", folder, err)
	}
	return n > 0, nil
}

// SaveSession records id as the group's session, unless the session was
// reset after since (when the run that produced id started); saved says
// which.
func (s *Store) SaveSession(ctx context.Context, folder, id string, since time.Time) (saved bool, err error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO sessions (folder, session_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at
		WHERE sessions.session_id != '' OR sessions.updated_at <= ?`,
		folder, id, time.Now().UnixMilli(), since.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("messages: save the session of %s: %w", folder, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
