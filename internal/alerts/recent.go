package alerts

import (
	"context"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Recorded is a violation with its row id, the order the console's live
// view follows.
type Recorded struct {
	ID int64 `json:"id"`
	security.Violation
}

// After returns up to limit violations recorded after the row id, oldest
// first; group "" means every group.
func After(ctx context.Context, db *store.DB, id int64, group string, limit int) ([]Recorded, error) {
	return recorded(ctx, db, `SELECT id, time, grp, kind, tool, target, detail, action, rule FROM violations
		WHERE id > ? AND (? = '' OR grp = ?) ORDER BY id LIMIT ?`, id, group, group, limit)
}

// Newest returns the newest limit violations (of group, or all when ""),
// newest first.
func Newest(ctx context.Context, db *store.DB, group string, limit int) ([]Recorded, error) {
	return recorded(ctx, db, `SELECT id, time, grp, kind, tool, target, detail, action, rule FROM violations
		WHERE (? = '' OR grp = ?) ORDER BY id DESC LIMIT ?`, group, group, limit)
}

// LastID is the newest violation's row id (0 for none).
func LastID(ctx context.Context, db *store.DB) (int64, error) {
	var id int64
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) FROM violations`).Scan(&id); err != nil {
		return 0, fmt.Errorf("alerts: newest violation: %w", err)
	}
	return id, nil
}

func recorded(ctx context.Context, db *store.DB, q string, args ...any) ([]Recorded, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("alerts: read violations: %w", err)
	}
	defer rows.Close()
	out := []Recorded{}
	for rows.Next() {
		var (
			r  Recorded
			ns int64
		)
		if err := rows.Scan(&r.ID, &ns, &r.Group, &r.Kind, &r.Tool, &r.Target, &r.Detail, &r.Action, &r.Rule); err != nil {
			return nil, fmt.Errorf("alerts: read violations: %w", err)
		}
		r.Time = time.Unix(0, ns).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}
