package usage_test

import (
	"context"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// Rows per group, provider and model, priced under provider/model first
// (AllTime's too, which pruning does not lower);
// the agents' own estimate is kept beside ours, the last of a run standing.
func TestTotalsByModelAndAgentCost(t *testing.T) {
	ctx := context.Background()
	s, db := openStore(t)
	prices := usage.Prices{"claude-haiku-4-5": {Input: 1, Output: 5}, "local/qwen": {}}
	at := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	for _, r := range []usage.Request{
		{Time: at, Group: "family", Run: "a", Provider: "anthropic", Model: "claude-haiku-4-5", Tokens: gateway.Tokens{Input: 1000, Output: 100}},
		{Time: at, Group: "family", Run: "a", Provider: "anthropic", Model: "claude-haiku-4-5", Tokens: gateway.Tokens{Input: 1000}},
		{Time: at, Group: "family", Run: "b", Provider: "local", Model: "qwen", Tokens: gateway.Tokens{Input: 5000, Output: 500}},
		{Time: at, Group: "work", Run: "c", Provider: "local", Model: "mystery", Tokens: gateway.Tokens{Input: 7}},
	} {
		if err := s.Record(ctx, r.PricedBy(prices)); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.TotalsByModel(ctx, at.Add(-time.Hour), at.Add(time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []usage.ModelTotal{
		{Group: "family", Provider: "anthropic", Model: "claude-haiku-4-5", Requests: 2, Tokens: gateway.Tokens{Input: 2000, Output: 100}, CostUSD: 0.0025, Priced: true},
		{Group: "family", Provider: "local", Model: "qwen", Requests: 1, Tokens: gateway.Tokens{Input: 5000, Output: 500}, Priced: true},
		{Group: "work", Provider: "local", Model: "mystery", Requests: 1, Tokens: gateway.Tokens{Input: 7}},
	}
	check := func(what string, rows []usage.ModelTotal) {
		t.Helper()
		if len(rows) != len(want) {
			t.Fatalf("%s: rows %+v", what, rows)
		}
		for i := range want {
			got := rows[i]
			if got.Group != want[i].Group || got.Provider != want[i].Provider || got.Model != want[i].Model || got.Requests != want[i].Requests ||
				got.Tokens != want[i].Tokens || !near(got.CostUSD, want[i].CostUSD) || got.Priced != want[i].Priced {
				t.Errorf("%s: row %d: %+v, want %+v", what, i, got, want[i])
			}
		}
	}
	check("TotalsByModel", rows)
	if err := s.RecordAgentCost(ctx, "family", "a", 0.001, at); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordAgentCost(ctx, "family", "a", 0.003, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	totals, err := s.Totals(ctx, at.Add(-time.Hour), at.Add(time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	if totals[0].AgentCostUSD == nil || !near(*totals[0].AgentCostUSD, 0.003) || totals[1].AgentCostUSD != nil {
		t.Errorf("agent estimates: %+v", totals)
	}
	// The totals since the start are the same sums, and stay so when
	// retention has pruned every request.
	if _, err := db.ExecContext(ctx, `DELETE FROM usage_requests`); err != nil {
		t.Fatal(err)
	}
	all, err := s.AllTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("AllTime after the requests were pruned", all)
}

// A group on a fallback: the main chat is told once after TellAfter, and
// once when the chosen upstream serves it again; never before, never twice.
func TestFallbackNotices(t *testing.T) {
	ctx := context.Background()
	s, db := openStore(t)
	var told []string
	onFallback := func(ctx context.Context, tx *store.Tx, since time.Time) error {
		told = append(told, "on since "+since.UTC().Format("15:04"))
		return nil
	}
	back := func(ctx context.Context, tx *store.Tx, upstream string) error {
		told = append(told, "back from "+upstream)
		return nil
	}
	t0 := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	if err := s.OnChosen(ctx, "family", back); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{0, 5 * time.Minute, usage.TellAfter, usage.TellAfter + time.Minute} {
		if err := s.OnFallback(ctx, "family", "local/qwen", t0.Add(at), onFallback); err != nil {
			t.Fatal(err)
		}
	}
	now, err := usage.Fallbacks(ctx, db)
	if err != nil || len(now) != 1 || now[0].Upstream != "local/qwen" || !now[0].Since.Equal(t0) {
		t.Errorf("on a fallback: %+v %v", now, err)
	}
	for range 2 {
		if err := s.OnChosen(ctx, "family", back); err != nil {
			t.Fatal(err)
		}
	}
	// A short spell on a fallback tells no one.
	s.OnFallback(ctx, "work", "local/qwen", t0, onFallback)
	s.OnChosen(ctx, "work", back)
	if len(told) != 2 || told[0] != "on since 09:00" || told[1] != "back from local/qwen" {
		t.Errorf("told %q", told)
	}
	if now, _ := usage.Fallbacks(ctx, db); len(now) != 0 {
		t.Errorf("still on a fallback: %+v", now)
	}
}
