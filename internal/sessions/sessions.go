// Package sessions keeps each group's agent session id: the one the next
// run resumes. A reset (the CLI's reset-session, a /new message, a session
// the agent no longer has) empties it, and a run that started before the
// reset cannot bring its old session back when it ends.
package sessions

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Querier is what both *sql.DB and *sql.Tx offer.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Get returns the session the group's next run resumes; "" for a fresh one.
func Get(ctx context.Context, q Querier, folder string) (string, error) {
	var id string
	err := q.QueryRowContext(ctx, `SELECT session_id FROM sessions WHERE folder = ?`, folder).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return id, err
}

// Save records id as the group's session, unless the session was reset
// after since (the start of the run that produced id). It reports whether
// id was saved.
func Save(ctx context.Context, q Querier, folder, id string, since time.Time) (bool, error) {
	now := time.Now().UnixMilli()
	res, err := q.ExecContext(ctx, `INSERT INTO sessions (folder, session_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at
		WHERE sessions.updated_at <= ? OR sessions.session_id != ''`, folder, id, now, since.UnixMilli())
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Set records id as the group's session unconditionally (an import).
func Set(ctx context.Context, q Querier, folder, id string) error {
	_, err := q.ExecContext(ctx, `INSERT INTO sessions (folder, session_id, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (folder) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at`,
		folder, id, time.Now().UnixMilli())
	return err
}

// Reset makes the group's next run start a fresh session, and returns when
// it did so (a run that started before then keeps its session to itself).
func Reset(ctx context.Context, q Querier, folder string) (time.Time, error) {
	now := time.Now()
	_, err := q.ExecContext(ctx, `INSERT INTO sessions (folder, session_id, updated_at) VALUES (?, '', ?)
		ON CONFLICT (folder) DO UPDATE SET session_id = '', updated_at = excluded.updated_at`, folder, now.UnixMilli())
	return now, err
}
