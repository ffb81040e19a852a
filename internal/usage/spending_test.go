package usage_test

import (
	"context"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// A group over its daily budget is over; the main group has none unless
// its own, so the same spend leaves it under.
func TestSpendingAgainstBudgets(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	prices := usage.Prices{"m": {Output: 1e6}} // $1 an output token
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, r := range []usage.Request{
		{Time: now.Add(-time.Hour), Group: "family", Run: "a", Model: "m", Tokens: gateway.Tokens{Output: 2}},
		{Time: now.AddDate(0, 0, -3), Group: "family", Run: "b", Model: "m", Tokens: gateway.Tokens{Output: 5}},
		{Time: now.Add(-time.Hour), Group: "main", Run: "c", Model: "m", Tokens: gateway.Tokens{Output: 2}},
	} {
		if err := s.Record(ctx, r.PricedBy(prices)); err != nil {
			t.Fatal(err)
		}
	}
	one, ten := 1.0, 10.0
	gs := []groups.Group{{Folder: "family"}, {Folder: "main", IsMain: true}, {Folder: "quiet"}}
	got, err := s.Spending(ctx, gs, security.Budget{Daily: &one, Monthly: &ten}, now, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if f := got["family"]; !f.Over || f.Today.Requests != 1 || f.Month.Requests != 2 || !near(f.Month.CostUSD, 7) || *f.Budget.Daily != 1 {
		t.Errorf("family: %+v", f)
	}
	if m := got["main"]; m.Over || m.Budget.Daily != nil || m.Today.Requests != 1 {
		t.Errorf("main: %+v", m)
	}
	if q, ok := got["quiet"]; !ok || q.Over || q.Month.Requests != 0 {
		t.Errorf("quiet: %+v %v", q, ok)
	}
}
