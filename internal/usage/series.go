package usage

import (
	"context"
	"fmt"
	"time"
)

// DayCost is what one group's requests of one local day cost.
type DayCost struct {
	Group string
	Day   string // 2006-01-02 in loc
	Cost  float64
}

// DailyCost sums the cost per group and local day since then (the
// console's 30-day chart). Rows are few: one per request, summed here.
func (s *Store) DailyCost(ctx context.Context, since time.Time, loc *time.Location) ([]DayCost, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT group_folder, at, cost_usd FROM usage_requests WHERE at >= ? ORDER BY at`, since.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("sum daily model cost: %w", err)
	}
	defer rows.Close()
	idx := map[[2]string]int{}
	var out []DayCost
	for rows.Next() {
		var g string
		var at int64
		var usd float64
		if err := rows.Scan(&g, &at, &usd); err != nil {
			return nil, fmt.Errorf("sum daily model cost: %w", err)
		}
		k := [2]string{g, time.UnixMilli(at).In(loc).Format(time.DateOnly)}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, DayCost{Group: k[0], Day: k[1]})
		}
		out[i].Cost += usd
	}
	return out, rows.Err()
}

// RunUsage is the model usage of one run of a group.
type RunUsage struct {
	Run         string
	First, Last time.Time // its first and last answer
	Requests    int64
	Tokens      int64 // input + output
	CostUSD     float64
	Models      string
}

// Runs returns group's newest n runs that made model requests.
func (s *Store) Runs(ctx context.Context, group string, n int) ([]RunUsage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, min(at), max(at), count(*), sum(input_tokens + output_tokens), sum(cost_usd),
		group_concat(DISTINCT model) FROM usage_requests WHERE group_folder = ? GROUP BY run_id ORDER BY max(at) DESC LIMIT ?`, group, n)
	if err != nil {
		return nil, fmt.Errorf("runs of %s: %w", group, err)
	}
	defer rows.Close()
	var out []RunUsage
	for rows.Next() {
		var r RunUsage
		var first, last int64
		if err := rows.Scan(&r.Run, &first, &last, &r.Requests, &r.Tokens, &r.CostUSD, &r.Models); err != nil {
			return nil, fmt.Errorf("runs of %s: %w", group, err)
		}
		r.First, r.Last = time.UnixMilli(first), time.UnixMilli(last)
		out = append(out, r)
	}
	return out, rows.Err()
}
