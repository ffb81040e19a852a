package usage

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Store keeps the usage of every model request in SQLite (usage_requests,
// usage_notices, upstream_health: migrations/0019_usage.sql).
type Store struct {
	db     *store.DB
	health healthCache
}

// NewStore is the usage kept in db.
func NewStore(db *store.DB) *Store { return &Store{db: db} }

// Request is one model request as the relay saw it end.
type Request struct {
	Time  time.Time
	Group string // the group's folder
	Run   string // the run's id
	// Provider and Model as the config names them (Model as the answer
	// named it when the group has none of its own).
	Provider string
	Model    string
	Tokens   gateway.Tokens
	// CostUSD is Tokens at the model's price; Priced is false (and the
	// cost 0) for a model usage.prices does not know.
	CostUSD float64
	Priced  bool
}

// PricedBy fills in r's cost from prices: under "provider/model" first,
// else under the model.
func (r Request) PricedBy(prices Prices) Request {
	p, ok := prices.Lookup(r.Provider + "/" + r.Model)
	if !ok || r.Provider == "" {
		p, ok = prices.Lookup(r.Model)
	}
	r.Priced = ok
	r.CostUSD = 0
	if ok {
		r.CostUSD = p.Cost(r.Tokens)
	}
	return r
}

// Record writes r.
func (s *Store) Record(ctx context.Context, r Request) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO usage_requests
		(at, group_folder, run_id, provider, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd, priced)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Time.UnixMilli(), r.Group, r.Run, cmpOr(r.Provider, "anthropic"), r.Model, r.Tokens.Input, r.Tokens.Output, r.Tokens.CacheWrite, r.Tokens.CacheRead,
		r.CostUSD, r.Priced)
	if err != nil {
		return fmt.Errorf("record the usage of a %s request of %s: %w", r.Model, r.Group, err)
	}
	return nil
}

// Total is the usage of one group over a window (the JSON of
// `nanoclawd usage --json`).
type Total struct {
	Group    string `json:"group"`
	Requests int64  `json:"requests"`
	gateway.Tokens
	CostUSD float64 `json:"costUSD"`
	// Unpriced lists the models of the window that have no price: their
	// tokens are counted, not their cost.
	Unpriced []string `json:"unpricedModels,omitempty"`
	// AgentCostUSD is what the agents themselves estimated (the SDK's
	// total_cost_usd) for the window's runs, beside ours; absent when no
	// agent reported one.
	AgentCostUSD *float64 `json:"agentCostUSD,omitempty"`
	// Priced counts the requests that had a price: none of several means
	// the cost is unknown, not zero.
	Priced int64 `json:"-"`
}

// CostKnown reports whether t has a cost at all: a window of requests
// none of which had a price costs something nobody knows, never $0.
func (t Total) CostKnown() bool { return t.Requests == 0 || t.Priced > 0 }

// Cost is t's cost as people read it: "$1.25", "unpriced" when no
// request had a price, "$1.25 + unpriced" when some had none.
func (t Total) Cost() string { return CostText(t.CostUSD, t.CostKnown(), len(t.Unpriced) > 0) }

// CostText writes a cost: usd when known, else "unpriced"; partly says
// some of it is unpriced.
func CostText(usd float64, known, partly bool) string {
	if !known {
		return "unpriced"
	}
	s := Dollars(usd)
	if partly {
		s += " + unpriced"
	}
	return s
}

// Dollars writes an amount of money with the precision that keeps a
// small one from reading $0.00: cents, or as many decimals (up to four)
// as its first non-zero digit needs; "<$0.0001" below that.
func Dollars(usd float64) string {
	if usd <= 0 {
		return "$0.00"
	}
	for d := 2; d <= 4; d++ {
		if s := strconv.FormatFloat(usd, 'f', d, 64); strings.Trim(s, "0.") != "" {
			return "$" + s
		}
	}
	return "<$0.0001"
}

// MarshalJSON writes costUSD as null when the cost is unknown.
func (t Total) MarshalJSON() ([]byte, error) {
	type plain Total
	out := struct {
		plain
		CostUSD *float64 `json:"costUSD"`
	}{plain: plain(t)}
	if t.CostKnown() {
		out.CostUSD = &t.CostUSD
	}
	return json.Marshal(out)
}

// Totals sums the requests in [since, until) per group (only group, if
// not ""), in folder order.
func (s *Store) Totals(ctx context.Context, since, until time.Time, group string) ([]Total, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT group_folder, count(*), sum(input_tokens), sum(output_tokens),
		sum(cache_write_tokens), sum(cache_read_tokens), sum(cost_usd), sum(priced),
		coalesce(group_concat(DISTINCT CASE WHEN priced = 0 THEN model END), '')
		FROM usage_requests WHERE at >= ? AND at < ? AND (? = '' OR group_folder = ?)
		GROUP BY group_folder ORDER BY group_folder`, since.UnixMilli(), until.UnixMilli(), group, group)
	if err != nil {
		return nil, fmt.Errorf("sum model usage: %w", err)
	}
	defer rows.Close()
	out := []Total{}
	for rows.Next() {
		var t Total
		var unpriced string
		if err := rows.Scan(&t.Group, &t.Requests, &t.Input, &t.Output, &t.CacheWrite, &t.CacheRead, &t.CostUSD, &t.Priced, &unpriced); err != nil {
			return nil, fmt.Errorf("sum model usage: %w", err)
		}
		if unpriced != "" {
			t.Unpriced = strings.Split(unpriced, ",")
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, s.agentCosts(ctx, since, until, out)
}

// agentCosts adds each group's agent estimate to totals.
func (s *Store) agentCosts(ctx context.Context, since, until time.Time, totals []Total) error {
	rows, err := s.db.QueryContext(ctx, `SELECT group_folder, sum(cost_usd) FROM usage_agent_costs WHERE at >= ? AND at < ? GROUP BY group_folder`,
		since.UnixMilli(), until.UnixMilli())
	if err != nil {
		return fmt.Errorf("sum the agents' cost estimates: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var group string
		var usd float64
		if err := rows.Scan(&group, &usd); err != nil {
			return err
		}
		for i := range totals {
			if totals[i].Group == group {
				totals[i].AgentCostUSD = &usd
			}
		}
	}
	return rows.Err()
}

// ModelTotal is the usage of one group on one provider and model over a
// window (`nanoclawd usage --json --by model`).
type ModelTotal struct {
	Group    string `json:"group"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Requests int64  `json:"requests"`
	gateway.Tokens
	CostUSD float64 `json:"costUSD"`
	// Priced is false for a model usage.prices does not know: its tokens
	// are counted, not its cost.
	Priced bool `json:"priced"`
}

// MarshalJSON writes costUSD as null for a model without a price: its
// cost is unknown, never $0.
func (t ModelTotal) MarshalJSON() ([]byte, error) {
	type plain ModelTotal
	out := struct {
		plain
		CostUSD *float64 `json:"costUSD"`
	}{plain: plain(t)}
	if t.Priced {
		out.CostUSD = &t.CostUSD
	}
	return json.Marshal(out)
}

// TotalsByModel sums the requests in [since, until) per group, provider
// and model (only group, if not "").
func (s *Store) TotalsByModel(ctx context.Context, since, until time.Time, group string) ([]ModelTotal, error) {
	return s.modelTotals(ctx, `SELECT group_folder, provider, model, count(*), sum(input_tokens), sum(output_tokens),
		sum(cache_write_tokens), sum(cache_read_tokens), sum(cost_usd), min(priced)
		FROM usage_requests WHERE at >= ? AND at < ? AND (? = '' OR group_folder = ?)
		GROUP BY group_folder, provider, model ORDER BY group_folder, provider, model`, since.UnixMilli(), until.UnixMilli(), group, group)
}

// AllTime is every request recorded since the database was made, per
// group, provider and model: usage_totals, which a trigger adds each
// request to, so pruning usage_requests lowers none of it, and reading it
// costs a row per group and model however many requests there were.
func (s *Store) AllTime(ctx context.Context) ([]ModelTotal, error) {
	return s.modelTotals(ctx, `SELECT group_folder, provider, model, requests, input_tokens, output_tokens,
		cache_write_tokens, cache_read_tokens, cost_usd, priced FROM usage_totals ORDER BY group_folder, provider, model`)
}

func (s *Store) modelTotals(ctx context.Context, query string, args ...any) ([]ModelTotal, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sum model usage by model: %w", err)
	}
	defer rows.Close()
	out := []ModelTotal{}
	for rows.Next() {
		var t ModelTotal
		if err := rows.Scan(&t.Group, &t.Provider, &t.Model, &t.Requests, &t.Input, &t.Output, &t.CacheWrite, &t.CacheRead, &t.CostUSD, &t.Priced); err != nil {
			return nil, fmt.Errorf("sum model usage by model: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Spent is what group's requests since then cost, in USD.
func (s *Store) Spent(ctx context.Context, group string, since time.Time) (float64, error) {
	var usd float64
	err := s.db.QueryRowContext(ctx, `SELECT coalesce(sum(cost_usd), 0) FROM usage_requests WHERE group_folder = ? AND at >= ?`,
		group, since.UnixMilli()).Scan(&usd)
	if err != nil {
		return 0, fmt.Errorf("sum the spend of %s: %w", group, err)
	}
	return usd, nil
}

// Once runs do (which queues a notice) in the transaction that records
// the notice kind of group for period, unless it was recorded before.
// It reports whether do ran.
func (s *Store) Once(ctx context.Context, group, kind, period string, do func(context.Context, *store.Tx) error) (bool, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO usage_notices (group_folder, kind, period, at) VALUES (?, ?, ?, ?)`,
		group, kind, period, time.Now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("record a %s notice of %s: %w", kind, group, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if err := do(ctx, tx); err != nil {
		return false, err
	}
	return true, tx.Commit()
}

// Standing is where a group stands in one limited period: what it spent
// since the period began, and how that compares with the limit.
type Standing struct {
	Period
	Spent float64
	Level Level
}

// Standings is where group stands in each of periods (Periods gives them
// for a budget).
func (s *Store) Standings(ctx context.Context, group string, periods []Period) ([]Standing, error) {
	out := make([]Standing, 0, len(periods))
	for _, p := range periods {
		spent, err := s.Spent(ctx, group, p.Start)
		if err != nil {
			return nil, err
		}
		out = append(out, Standing{p, spent, LevelOf(spent, p.Limit)})
	}
	return out, nil
}

// SpendSince is each group's usage since then.
func (s *Store) SpendSince(ctx context.Context, since time.Time) (map[string]Total, error) {
	totals, err := s.Totals(ctx, since, time.Now().Add(time.Hour), "")
	if err != nil {
		return nil, err
	}
	out := make(map[string]Total, len(totals))
	for _, t := range totals {
		out[t.Group] = t
	}
	return out, nil
}
