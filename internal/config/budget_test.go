package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

func TestBudgetAndPrices(t *testing.T) {
	cfg, err := load(t, `{
		"agent": {"budget": {"daily": 2, "monthly": 30.5}},
		"usage": {"prices": {"claude-sonnet-4-5": {"input": 2, "output": 10}, "my-model": {"input": 1, "output": 1, "cacheWrite": 0, "cacheRead": 0}}},
	}`)
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Agent.Budget; b.Daily == nil || *b.Daily != 2 || b.Monthly == nil || *b.Monthly != 30.5 {
		t.Errorf("budget %+v", b)
	}
	p := cfg.Usage.Prices
	if got := p["claude-sonnet-4-5"]; got.Input != 2 || got.Output != 10 || got.CacheWrite != 0 {
		t.Errorf("a named model's price replaces its default whole: %+v", got)
	}
	if _, ok := p["my-model"]; !ok || p["claude-haiku-4-5"].Output != 5 {
		t.Errorf("the other defaults stay beside a new model: %+v", p)
	}

	for body, want := range map[string]string{
		`{"agent": {"budget": {"daily": -1}}}`:                          `:1:32: agent.budget.daily is -1: a limit is USD, 0 or more`,
		`{"agent": {"budget": {"weekly": 5}}}`:                          `unknown key "agent.budget.weekly"`,
		`{"agent": {"budget": {"daily": "5"}}}`:                         `agent.budget.daily must be a number, not a string`,
		`{"hostSecurity": {"budget": {"daily": 5}}}`:                    `hostSecurity.budget: the budget of every group is agent.budget`,
		`{"usage": {"prices": {"m": {"inptu": 1}}}}`:                    `unknown key "usage.prices.m.inptu" (did you mean "usage.prices.m.input"?)`,
		`{"usage": {"prices": {"m": {"input": -3}}}}`:                   `usage.prices.m.input is -3`,
		`{"usage": {"prices": {"m": {"input": 1}, "m": {"input": 2}}}}`: `duplicate key "usage.prices.m"`,
	} {
		_, err := load(t, body)
		var errs Errors
		if !errors.As(err, &errs) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", body, err, want)
		}
	}
	// A group's override may hold a budget; it is checked like the rest.
	neg := -2.0
	if ps := ValidatePolicy(&security.Policy{Budget: &security.Budget{Daily: &neg}}, ""); len(ps) != 1 || ps[0].Key != "budget.daily" {
		t.Errorf("override budget problems: %+v", ps)
	}
}
