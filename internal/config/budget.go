package config

import (
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// validateBudget checks a group override's budget; in hostSecurity (prefix
// not "") a budget has no place: agent.budget is the global one.
func validateBudget(b *security.Budget, prefix string) []PolicyProblem {
	if b == nil {
		return nil
	}
	if prefix != "" {
		return []PolicyProblem{{prefix + ".budget", fmt.Sprintf("%s.budget: the budget of every group is agent.budget; one group's goes in its override ({\"budget\": {\"daily\": 5}} with `nanoclawd groups set-security`)", prefix)}}
	}
	return budgetProblems(*b, "budget")
}

// budgetProblems checks that each limit of b is a sum of money.
func budgetProblems(b security.Budget, key string) []PolicyProblem {
	var out []PolicyProblem
	for name, v := range map[string]*float64{"daily": b.Daily, "monthly": b.Monthly} {
		if v != nil && *v < 0 {
			k := key + "." + name
			out = append(out, PolicyProblem{k, fmt.Sprintf("%s is %g: a limit is USD, 0 or more (remove the key for no limit)", k, *v)})
		}
	}
	return out
}

// usageProblems checks usage.prices.
func usageProblems(u Usage) []PolicyProblem {
	var out []PolicyProblem
	for model, p := range u.Prices {
		for name, v := range map[string]float64{"input": p.Input, "output": p.Output, "cacheWrite": p.CacheWrite, "cacheRead": p.CacheRead} {
			if v < 0 {
				k := "usage.prices." + model + "." + name
				out = append(out, PolicyProblem{k, fmt.Sprintf("%s is %g: a price is USD per million tokens, 0 or more", k, v)})
			}
		}
	}
	return out
}

// Usage configures how model usage is priced.
type Usage struct {
	// Prices per model id; a model the file names replaces its default.
	Prices usage.Prices `json:"prices"`
}
