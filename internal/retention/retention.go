// Package retention prunes what the database records once it is older
// than the owner keeps it (config retention.*), at start and daily, and
// gives the freed pages back to the file system.
//
// Every table stays its owner's; what this package knows of each is only
// the rule below: which rows are old, and which must stay whatever their
// age. Rows go a batch at a time, each batch its own short transaction
// (BatchHold bounds it), so the daemon's other writers (a message coming
// in, an answer going out) never wait long behind a prune.
package retention

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Ages are how long each kind of record is kept; 0 keeps it for ever.
type Ages struct {
	Messages, Usage, Audit, Runs time.Duration
}

// rule is one table's pruning: rows whose column (in unit since the
// epoch) is before the cutoff, and for which keep is false, go.
type rule struct {
	kind   string // messages | usage | audit | runs
	table  string
	column string
	unit   time.Duration // of column: time.Millisecond, time.Nanosecond, time.Hour
	// keep, when set, is an SQL condition on the table's row that spares it.
	keep string
}

var rules = []rule{
	// A message still waiting for an answer stays, however old (a group
	// whose agent failed for weeks still gets it); an unregistered chat's
	// never will be answered. The FTS index follows by its triggers.
	{kind: "messages", table: "messages", column: "time", unit: time.Millisecond,
		keep: `is_bot = 0 AND seq > COALESCE((SELECT answered_seq FROM cursors c WHERE c.chat_jid = messages.chat_jid), 0)
			AND chat_jid IN (SELECT jid FROM groups)`},
	{kind: "usage", table: "usage_requests", column: "at", unit: time.Millisecond},
	{kind: "usage", table: "usage_notices", column: "at", unit: time.Millisecond},
	// A violation not yet in its group's security.jsonl stays until it is.
	{kind: "audit", table: "violations", column: "time", unit: time.Nanosecond, keep: `logged = 0`},
	{kind: "runs", table: "task_run_logs", column: "started_at", unit: time.Millisecond},
	{kind: "runs", table: "run_hours", column: "hour", unit: time.Hour},
}

// Pruner prunes DB by Ages.
type Pruner struct {
	DB   *store.DB
	Ages func() Ages // read at each pass
	Log  zerolog.Logger
	// Every is the time between passes; default a day.
	Every time.Duration
}

// Batch is how many rows one transaction deletes at first; BatchHold is
// how long one may hold the write lock before the next batch is halved.
const (
	Batch     = 500
	BatchHold = 20 * time.Millisecond
)

// Result is what one pass did.
type Result struct {
	Deleted map[string]int64 // rows per kind
	// Longest is the longest write transaction of the pass (a batch, or a
	// step of the vacuum).
	Longest time.Duration
	// Freed is the bytes the file shrank by.
	Freed int64
}

// Run prunes now and then every Every until ctx ends.
func (p *Pruner) Run(ctx context.Context) error {
	every := p.Every
	if every <= 0 {
		every = 24 * time.Hour
	}
	for {
		if r, err := p.Prune(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.Log.Warn().Err(err).Msg("retention: prune")
		} else if n := r.total(); n > 0 {
			p.Log.Info().Int64("rows", n).Interface("by_kind", r.Deleted).Int64("freed_bytes", r.Freed).
				Dur("longest_tx", r.Longest).Msg("retention: pruned")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

func (r Result) total() int64 {
	var n int64
	for _, v := range r.Deleted {
		n += v
	}
	return n
}

// Prune runs one pass: every rule whose kind has an age, then the vacuum.
func (p *Pruner) Prune(ctx context.Context) (Result, error) {
	now := time.Now()
	ages := p.Ages()
	res := Result{Deleted: map[string]int64{}}
	for _, r := range rules {
		age := map[string]time.Duration{"messages": ages.Messages, "usage": ages.Usage, "audit": ages.Audit, "runs": ages.Runs}[r.kind]
		if age <= 0 {
			continue
		}
		cutoff := now.Add(-age).UnixNano() / int64(r.unit)
		n, err := p.pruneRule(ctx, r, cutoff, &res.Longest)
		res.Deleted[r.kind] += n
		if err != nil {
			return res, err
		}
	}
	freed, err := p.vacuum(ctx, &res.Longest)
	res.Freed = freed
	return res, err
}

// pruneRule deletes r's old rows a batch at a time: the batch is chosen by
// a read, which holds no lock a writer waits for, then deleted by rowid in
// a short transaction that checks the age again.
func (p *Pruner) pruneRule(ctx context.Context, r rule, cutoff int64, longest *time.Duration) (int64, error) {
	where := r.column + " < ?"
	if r.keep != "" {
		where += " AND NOT (" + r.keep + ")"
	}
	pick := `SELECT rowid FROM ` + r.table + ` WHERE ` + where + ` ORDER BY rowid LIMIT ?`
	del := `DELETE FROM ` + r.table + ` WHERE rowid IN (SELECT value FROM json_each(?)) AND ` + where
	var total int64
	for batch := Batch; ; {
		ids, err := p.pick(ctx, pick, cutoff, batch)
		if err != nil || len(ids) == 0 {
			return total, err
		}
		list, _ := json.Marshal(ids)
		start := time.Now()
		tx, err := p.DB.Begin(ctx)
		if err != nil {
			return total, fmt.Errorf("retention: %s: %w", r.table, err)
		}
		res, err := tx.ExecContext(ctx, del, string(list), cutoff)
		if err == nil {
			err = tx.Commit()
		}
		tx.Rollback()
		if err != nil {
			return total, fmt.Errorf("retention: %s: %w", r.table, err)
		}
		held := time.Since(start)
		*longest = max(*longest, held)
		n, _ := res.RowsAffected()
		total += n
		if held > BatchHold && batch > 10 {
			batch /= 2
		}
		if len(ids) < batch {
			return total, nil
		}
	}
}

func (p *Pruner) pick(ctx context.Context, query string, cutoff int64, n int) ([]int64, error) {
	rows, err := p.DB.QueryContext(ctx, query, cutoff, n)
	if err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// vacuumStep is how many free pages one incremental_vacuum returns to the
// file system at first: 1 MiB of 4 KiB pages, about ten milliseconds of
// writing (a thousand took 50 ms on a loaded 2-core machine).
const vacuumStep = 256

// vacuum shrinks the file by its free pages (auto_vacuum is INCREMENTAL,
// store.Open sees to it), a step at a time so no step holds the lock long.
func (p *Pruner) vacuum(ctx context.Context, longest *time.Duration) (int64, error) {
	var pageSize, before int64
	if err := p.DB.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&pageSize); err != nil {
		return 0, fmt.Errorf("retention: vacuum: %w", err)
	}
	if err := p.DB.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&before); err != nil {
		return 0, fmt.Errorf("retention: vacuum: %w", err)
	}
	left := before
	for step := vacuumStep; left > 0; {
		start := time.Now()
		// Read to its end: each row the pragma yields is a page moved.
		rows, err := p.DB.QueryContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, step))
		if err != nil {
			return (before - left) * pageSize, fmt.Errorf("retention: vacuum: %w", err)
		}
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return (before - left) * pageSize, fmt.Errorf("retention: vacuum: %w", err)
		}
		held := time.Since(start)
		*longest = max(*longest, held)
		if held > BatchHold && step > 16 {
			step /= 2
		}
		var now int64
		if err := p.DB.QueryRowContext(ctx, `PRAGMA freelist_count`).Scan(&now); err != nil {
			return (before - left) * pageSize, fmt.Errorf("retention: vacuum: %w", err)
		}
		if now >= left {
			break // nothing more moves (another writer's pages, say)
		}
		left = now
	}
	return (before - left) * pageSize, nil
}
