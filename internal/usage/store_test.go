package usage_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

func openStore(t *testing.T) (*usage.Store, *store.DB) {
	t.Helper()
	db, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return usage.NewStore(db), db
}

func TestTotalsAndSpent(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	prices := usage.Prices{"claude-sonnet-4-5": {Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}}
	day := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	for _, r := range []usage.Request{
		{Time: day, Group: "family", Run: "a", Model: "claude-sonnet-4-5-20250929", Tokens: gateway.Tokens{Input: 1000, Output: 100, CacheWrite: 10, CacheRead: 1}},
		{Time: day.Add(time.Hour), Group: "family", Run: "b", Model: "claude-sonnet-4-5", Tokens: gateway.Tokens{Input: 2000, Output: 200}},
		{Time: day.Add(time.Hour), Group: "family", Run: "b", Model: "mystery-1", Tokens: gateway.Tokens{Input: 5, Output: 5}},
		{Time: day.Add(-24 * time.Hour), Group: "family", Run: "c", Model: "claude-sonnet-4-5", Tokens: gateway.Tokens{Input: 1e6}},
		{Time: day, Group: "main", Run: "d", Model: "claude-sonnet-4-5", Tokens: gateway.Tokens{Output: 1000}},
	} {
		if err := s.Record(ctx, r.PricedBy(prices)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Totals(ctx, day.Add(-time.Hour), day.Add(2*time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	wantFamily := usage.Total{Group: "family", Requests: 3, Tokens: gateway.Tokens{Input: 3005, Output: 305, CacheWrite: 10, CacheRead: 1},
		CostUSD: (3000*3 + 300*15 + 10*3.75 + 1*0.3) / 1e6, Unpriced: []string{"mystery-1"}}
	if len(got) != 2 || got[0].Group != "family" || got[1].Group != "main" {
		t.Fatalf("totals %+v", got)
	}
	if g := got[0]; g.Requests != wantFamily.Requests || g.Tokens != wantFamily.Tokens || !near(g.CostUSD, wantFamily.CostUSD) ||
		len(g.Unpriced) != 1 || g.Unpriced[0] != "mystery-1" {
		t.Errorf("family: %+v, want %+v", g, wantFamily)
	}
	if only, _ := s.Totals(ctx, day.Add(-time.Hour), day.Add(2*time.Hour), "main"); len(only) != 1 || !near(only[0].CostUSD, 0.015) {
		t.Errorf("main alone: %+v", only)
	}
	spent, err := s.Spent(ctx, "family", day.Add(-48*time.Hour))
	if err != nil || !near(spent, wantFamily.CostUSD+3) {
		t.Errorf("spent %g %v", spent, err)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// A notice is queued once per group, kind and period, and not at all when
// queueing it fails (then the next attempt sends it).
func TestOnce(t *testing.T) {
	ctx := context.Background()
	s, db := openStore(t)
	queued := 0
	do := func(ctx context.Context, tx *store.Tx) error { queued++; return nil }
	fail := func(ctx context.Context, tx *store.Tx) error { return errors.New("no main group") }
	if ran, err := s.Once(ctx, "family", "daily-over", "2026-11-26", fail); ran || err == nil {
		t.Fatalf("a failed notice counts as sent: %v %v", ran, err)
	}
	for i := 0; i < 3; i++ {
		if _, err := s.Once(ctx, "family", "daily-over", "2026-11-26", do); err != nil {
			t.Fatal(err)
		}
	}
	s.Once(ctx, "family", "daily-over", "2026-11-27", do)
	s.Once(ctx, "family", "daily-warn", "2026-11-26", do)
	s.Once(ctx, "work", "daily-over", "2026-11-26", do)
	// Another process (a restarted daemon) sees what was sent.
	if ran, _ := usage.NewStore(db).Once(ctx, "work", "daily-over", "2026-11-26", do); ran {
		t.Error("sent again after a restart")
	}
	if queued != 4 {
		t.Errorf("queued %d notices, want 4", queued)
	}
}

// A refused credential is told once and stands until a request succeeds;
// a rate limit keeps its latest retry time.
func TestHealth(t *testing.T) {
	ctx := context.Background()
	s, db := openStore(t)
	told := 0
	notify := func(ctx context.Context, tx *store.Tx) error { told++; return nil }
	now := time.Now().Truncate(time.Millisecond)
	for i := 0; i < 3; i++ {
		if _, err := s.Problem(ctx, usage.Health{Kind: usage.HealthCredential, Status: 401, Detail: "refused", Since: now}, notify); err != nil {
			t.Fatal(err)
		}
	}
	s.Problem(ctx, usage.Health{Kind: usage.HealthRate, Status: 429, Since: now, RetryAt: now.Add(time.Minute)}, nil)
	s.Problem(ctx, usage.Health{Kind: usage.HealthRate, Status: 529, Since: now, RetryAt: now.Add(2 * time.Minute)}, nil)
	hs, err := usage.HealthOf(ctx, db)
	if err != nil || len(hs) != 2 || told != 1 {
		t.Fatalf("health %+v %v, told %d times", hs, err, told)
	}
	if hs[1].Kind != usage.HealthRate || hs[1].Status != 529 || !hs[1].RetryAt.Equal(now.Add(2*time.Minute)) {
		t.Errorf("rate: %+v", hs[1])
	}
	// A fresh store (a restarted daemon) still knows, and clears it.
	if err := usage.NewStore(db).Resolved(ctx, usage.HealthCredential, usage.HealthRate); err != nil {
		t.Fatal(err)
	}
	if hs, _ := usage.HealthOf(ctx, db); len(hs) != 0 {
		t.Errorf("still standing after a success: %+v", hs)
	}
	s.Problem(ctx, usage.Health{Kind: usage.HealthCredential, Status: 403, Since: now}, notify)
	if told != 2 {
		t.Errorf("a new refusal after a success was told %d times in all, want 2", told)
	}
}

func TestPeriods(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	daily, monthly := 2.0, 30.0
	// 23:30 UTC on the 30th is already 1 December in Berlin.
	ps := usage.Periods(time.Date(2026, 11, 30, 23, 30, 0, 0, time.UTC), loc, &daily, &monthly)
	if len(ps) != 2 || ps[0].Key != "2026-12-01" || ps[1].Key != "2026-12" ||
		!ps[0].End.Equal(time.Date(2026, 12, 2, 0, 0, 0, 0, loc)) || !ps[1].Start.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, loc)) {
		t.Errorf("periods %+v", ps)
	}
	if ps := usage.Periods(time.Now(), loc, nil, nil); len(ps) != 0 {
		t.Errorf("no limits, periods %+v", ps)
	}
	for _, c := range []struct {
		spent float64
		want  usage.Level
	}{{0, usage.Under}, {1.59, usage.Under}, {1.6, usage.Warn}, {2, usage.Over}, {5, usage.Over}} {
		if got := usage.LevelOf(c.spent, 2); got != c.want {
			t.Errorf("%g of 2: %v, want %v", c.spent, got, c.want)
		}
	}
}

// Standings compares what a group spent in each budgeted period with its
// limit: under, warned at 80 %, over.
func TestStandings(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	prices := usage.Prices{"m": {Output: 1e6}} // one USD an output token
	for _, r := range []usage.Request{
		{Time: now.Add(-time.Hour), Group: "family", Run: "a", Model: "m", Tokens: gateway.Tokens{Output: 2}},
		{Time: now.AddDate(0, 0, -3), Group: "family", Run: "b", Model: "m", Tokens: gateway.Tokens{Output: 7}},
	} {
		if err := s.Record(ctx, r.PricedBy(prices)); err != nil {
			t.Fatal(err)
		}
	}
	daily, monthly := 2.4, 9.0
	got, err := s.Standings(ctx, "family", usage.Periods(now, time.UTC, &daily, &monthly))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "daily" || !near(got[0].Spent, 2) || got[0].Level != usage.Warn ||
		got[1].Name != "monthly" || !near(got[1].Spent, 9) || got[1].Level != usage.Over {
		t.Errorf("standings %+v; want daily 2 of 2.4 (warn), monthly 9 of 9 (over)", got)
	}
	if got, err := s.Standings(ctx, "main", usage.Periods(now, time.UTC, &daily, nil)); err != nil || len(got) != 1 || got[0].Level != usage.Under {
		t.Errorf("main: %+v, %v; want one period, under", got, err)
	}
}

// A small cost is shown with the decimals that keep it from reading $0.00.
func TestDollars(t *testing.T) {
	for usd, want := range map[float64]string{0: "$0.00", 0.02: "$0.02", 1.5: "$1.50", 12.345: "$12.35",
		0.0123: "$0.01", 0.004: "$0.004", 0.0001: "$0.0001", 0.00004: "<$0.0001"} {
		if got := usage.Dollars(usd); got != want {
			t.Errorf("Dollars(%v) = %q, want %q", usd, got, want)
		}
	}
}
