package usage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// TellAfter is how long a group is served by a fallback before the main
// chat is told (once; and once more when it is back).
const TellAfter = 10 * time.Minute

// OnFallback records that group's request was served by the fallback
// upstream at now. Once the group has been on a fallback for TellAfter,
// notify (which queues a message to the main chat, given since) runs in
// the transaction that marks it told.
func (s *Store) OnFallback(ctx context.Context, group, upstream string, now time.Time, notify func(ctx context.Context, tx *store.Tx, since time.Time) error) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO group_fallbacks (group_folder, upstream, since) VALUES (?, ?, ?)
		ON CONFLICT (group_folder) DO UPDATE SET upstream = excluded.upstream`, group, upstream, now.UnixMilli()); err != nil {
		return fmt.Errorf("record that %s is served by %s: %w", group, upstream, err)
	}
	var since int64
	var told bool
	if err := tx.QueryRowContext(ctx, `SELECT since, told FROM group_fallbacks WHERE group_folder = ?`, group).Scan(&since, &told); err != nil {
		return err
	}
	if !told && now.Sub(time.UnixMilli(since)) >= TellAfter {
		if _, err := tx.ExecContext(ctx, `UPDATE group_fallbacks SET told = 1 WHERE group_folder = ?`, group); err != nil {
			return err
		}
		if err := notify(ctx, tx, time.UnixMilli(since)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// OnChosen records that group's request was served by its chosen
// upstream: the fallback row goes, and if the main chat was told about
// it, notify runs in the same transaction.
func (s *Store) OnChosen(ctx context.Context, group string, notify func(ctx context.Context, tx *store.Tx, upstream string) error) error {
	// Most answers come from the chosen upstream: a read, no write.
	var upstream string
	var told bool
	err := s.db.QueryRowContext(ctx, `SELECT upstream, told FROM group_fallbacks WHERE group_folder = ?`, group).Scan(&upstream, &told)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM group_fallbacks WHERE group_folder = ?`, group)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 && told {
		if err := notify(ctx, tx, upstream); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// OnFallbackNow is a group served by a fallback, for status.
type OnFallbackNow struct {
	Group    string    `json:"group"`
	Upstream string    `json:"upstream"`
	Since    time.Time `json:"since"`
}

// Fallbacks lists the groups served by a fallback (status reads it).
func Fallbacks(ctx context.Context, db *store.DB) ([]OnFallbackNow, error) {
	rows, err := db.QueryContext(ctx, `SELECT group_folder, upstream, since FROM group_fallbacks ORDER BY group_folder`)
	if err != nil {
		return nil, fmt.Errorf("read the groups on a fallback: %w", err)
	}
	defer rows.Close()
	out := []OnFallbackNow{}
	for rows.Next() {
		var f OnFallbackNow
		var since int64
		if err := rows.Scan(&f.Group, &f.Upstream, &since); err != nil {
			return nil, err
		}
		f.Since = time.UnixMilli(since)
		out = append(out, f)
	}
	return out, rows.Err()
}

// RecordAgentCost keeps what the agent itself estimated run cost (the
// SDK's total_cost_usd, which grows over a run: the last report stands).
func (s *Store) RecordAgentCost(ctx context.Context, group, run string, usd float64, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO usage_agent_costs (run_id, group_folder, at, cost_usd) VALUES (?, ?, ?, ?)
		ON CONFLICT (run_id) DO UPDATE SET at = excluded.at, cost_usd = excluded.cost_usd`, run, group, at.UnixMilli(), usd)
	if err != nil {
		return fmt.Errorf("record the agent's cost estimate for %s: %w", group, err)
	}
	return nil
}
