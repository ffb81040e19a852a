package usage

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Kinds of trouble with the model API.
const (
	HealthCredential = "credential" // 401/403: the daemon's credential is refused
	HealthRate       = "rate"       // 429/529: rate limited or overloaded
	// HealthDown: no upstream answered a request (refused, failed or
	// silent past agent.apiTimeout), until one does.
	HealthDown = "down"
)

// HealthKinds is every kind of trouble, for a series per kind from the
// start (internal/metrics).
var HealthKinds = []string{HealthCredential, HealthRate, HealthDown}

// Health is a standing problem with the model API, kept until a request
// succeeds.
type Health struct {
	Kind    string    `json:"kind"`
	Status  int       `json:"status"` // the HTTP status the API answered
	Detail  string    `json:"detail"`
	Since   time.Time `json:"since"`
	RetryAt time.Time `json:"retryAt,omitzero"` // HealthRate: when the API said to try again
}

// healthCache mirrors upstream_health, so that the relay's every
// successful answer does not cost a write.
type healthCache struct {
	mu     sync.Mutex
	loaded bool
	kinds  map[string]bool
}

// Problem records h. For a kind not yet recorded, notify (which queues a
// message to the main chat) runs in the same transaction and new is
// true; a kind already recorded is only updated (say, a new retry time).
func (s *Store) Problem(ctx context.Context, h Health, notify func(context.Context, *store.Tx) error) (new bool, err error) {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO upstream_health (kind, status, detail, since, retry_at) VALUES (?, ?, ?, ?, ?)`,
		h.Kind, h.Status, h.Detail, h.Since.UnixMilli(), unixMilli(h.RetryAt))
	if err != nil {
		return false, fmt.Errorf("record the model API's %d: %w", h.Status, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		if notify != nil {
			if err := notify(ctx, tx); err != nil {
				return false, err
			}
		}
		new = true
	} else if _, err := tx.ExecContext(ctx, `UPDATE upstream_health SET status = ?, detail = ?, retry_at = ? WHERE kind = ?`,
		h.Status, h.Detail, unixMilli(h.RetryAt), h.Kind); err != nil {
		return false, fmt.Errorf("record the model API's %d: %w", h.Status, err)
	}
	if err := tx.Commit(); err != nil {
		return false, err
	}
	if s.health.kinds == nil {
		s.health.kinds = map[string]bool{}
	}
	s.health.kinds[h.Kind] = true
	return new, nil
}

// Resolved forgets the problems of kinds (a request succeeded). It
// writes only when one of them was recorded.
func (s *Store) Resolved(ctx context.Context, kinds ...string) error {
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if !s.health.loaded {
		hs, err := HealthOf(ctx, s.db)
		if err != nil {
			return err
		}
		s.health.kinds = map[string]bool{}
		for _, h := range hs {
			s.health.kinds[h.Kind] = true
		}
		s.health.loaded = true
	}
	for _, k := range kinds {
		if !s.health.kinds[k] {
			continue
		}
		if _, err := s.db.ExecContext(ctx, `DELETE FROM upstream_health WHERE kind = ?`, k); err != nil {
			return fmt.Errorf("forget the model API's %s problem: %w", k, err)
		}
		delete(s.health.kinds, k)
	}
	return nil
}

// HealthOf lists the standing problems recorded in db (status and doctor
// read it; doctor without a running daemon).
func HealthOf(ctx context.Context, db *store.DB) ([]Health, error) {
	rows, err := db.QueryContext(ctx, `SELECT kind, status, detail, since, retry_at FROM upstream_health ORDER BY kind`)
	if err != nil {
		return nil, fmt.Errorf("read the model API's state: %w", err)
	}
	defer rows.Close()
	out := []Health{}
	for rows.Next() {
		var h Health
		var since, retry int64
		if err := rows.Scan(&h.Kind, &h.Status, &h.Detail, &since, &retry); err != nil {
			return nil, err
		}
		h.Since = time.UnixMilli(since)
		if retry > 0 {
			h.RetryAt = time.UnixMilli(retry)
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
