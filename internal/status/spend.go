package status

import (
	"context"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// spendNow is every group's model usage today and this month.
type spendNow struct{ today, month map[string]usage.Total }

func spendOf(ctx context.Context, u *usage.Store, cfg *config.Config, now time.Time) (spendNow, error) {
	s := spendNow{today: map[string]usage.Total{}, month: map[string]usage.Total{}}
	for _, span := range []struct {
		since time.Time
		into  map[string]usage.Total
	}{{usage.Today(now, cfg.Location()), s.today}, {usage.ThisMonth(now, cfg.Location()), s.month}} {
		totals, err := u.Totals(ctx, span.since, now.Add(time.Second), "")
		if err != nil {
			return s, err
		}
		for _, t := range totals {
			span.into[t.Group] = t
		}
	}
	return s, nil
}

// of is g's line of status: its spend and its budget.
func (s spendNow) of(g groups.Group, cfg *config.Config, now time.Time) *Usage {
	b := security.EffectiveBudget(cfg.Agent.Budget, g.Security, g.IsMain)
	u := &Usage{Daily: b.Daily, Monthly: b.Monthly}
	for _, x := range []struct {
		t  usage.Total
		to *Spend
	}{{s.today[g.Folder], &u.Today}, {s.month[g.Folder], &u.Month}} {
		*x.to = SpendOf(x.t)
	}
	for _, p := range usage.Periods(now, cfg.Location(), b.Daily, b.Monthly) {
		spent := u.Today.USD()
		if p.Name == "monthly" {
			spent = u.Month.USD()
		}
		if usage.LevelOf(spent, p.Limit) == usage.Over {
			u.Over = true
		}
	}
	return u
}
