package usage

import (
	"context"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// GroupSpend is a group's model usage today and this month (local time),
// its budget, and whether that is spent.
type GroupSpend struct {
	Today, Month Total
	Budget       security.Budget
	Over         bool // no model requests until the day or month turns
}

// Spending is what each of gs spent today and this month at now, in loc,
// against its budget: global (agent.budget) as security.EffectiveBudget
// applies it to the group.
func (s *Store) Spending(ctx context.Context, gs []groups.Group, global security.Budget, now time.Time, loc *time.Location) (map[string]GroupSpend, error) {
	today, month := map[string]Total{}, map[string]Total{}
	for _, span := range []struct {
		since time.Time
		into  map[string]Total
	}{{Today(now, loc), today}, {ThisMonth(now, loc), month}} {
		totals, err := s.Totals(ctx, span.since, now.Add(time.Second), "")
		if err != nil {
			return nil, err
		}
		for _, t := range totals {
			span.into[t.Group] = t
		}
	}
	out := map[string]GroupSpend{}
	for _, g := range gs {
		sp := GroupSpend{Today: today[g.Folder], Month: month[g.Folder],
			Budget: security.EffectiveBudget(global, g.Security, g.IsMain)}
		for _, p := range Periods(now, loc, sp.Budget.Daily, sp.Budget.Monthly) {
			t := sp.Today
			if p.Name == "monthly" {
				t = sp.Month
			}
			if LevelOf(t.knownUSD(), p.Limit) == Over {
				sp.Over = true
			}
		}
		out[g.Folder] = sp
	}
	return out, nil
}

// knownUSD is what t's priced requests cost; 0 when none had a price.
func (t Total) knownUSD() float64 {
	if !t.CostKnown() {
		return 0
	}
	return t.CostUSD
}
