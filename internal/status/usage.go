package status

import (
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// Usage is one group's model usage today and this month (local time).
type Usage struct {
	Today   Spend    `json:"today"`
	Month   Spend    `json:"month"`
	Daily   *float64 `json:"dailyLimit,omitempty"` // USD
	Monthly *float64 `json:"monthlyLimit,omitempty"`
	Over    bool     `json:"overBudget,omitempty"` // no model requests until the day or month turns
}

// Spend is the requests and cost of a span.
type Spend struct {
	Requests int64 `json:"requests"`
	// CostUSD is nil when no request of the span had a price: its cost
	// is unknown, never $0.
	CostUSD *float64 `json:"costUSD"`
	gateway.Tokens
	Unpriced []string `json:"unpricedModels,omitempty"` // the span's models without a price
}

// SpendOf is t as status shows it.
func SpendOf(t usage.Total) Spend {
	s := Spend{Requests: t.Requests, Tokens: t.Tokens, Unpriced: t.Unpriced}
	if t.CostKnown() {
		s.CostUSD = &t.CostUSD
	}
	return s
}

// usageOf is g's spend and budget as status shows them.
func usageOf(g usage.GroupSpend) *Usage {
	return &Usage{Today: SpendOf(g.Today), Month: SpendOf(g.Month), Daily: g.Budget.Daily, Monthly: g.Budget.Monthly, Over: g.Over}
}

// USD is what the span's priced requests cost.
func (s Spend) USD() float64 {
	if s.CostUSD == nil {
		return 0
	}
	return *s.CostUSD
}

// usageSection writes the model usage per group and the model API's
// standing problems.
func usageSection(p func(string, ...any), r Report) {
	modelSection(p, r)
	p("\nModel usage, today and this month ('nanoclawd usage' has the tokens)")
	p("  GROUP\tTODAY\tTHIS MONTH\tBUDGET")
	for _, g := range r.Groups {
		u := g.Usage
		if u == nil {
			u = &Usage{}
		}
		p("  %s\t%s\t%s\t%s", g.Folder, spendText(u.Today), spendText(u.Month), budgetText(u))
	}
	p("\nModel credential: %s", r.Credential)
	if len(r.ModelAPI) == 0 {
		p("\nModel API: no problem seen")
		return
	}
	p("\nModel API")
	for _, h := range r.ModelAPI {
		switch h.Kind {
		case usage.HealthCredential:
			p("  %s since %s ago: run 'claude setup-token' (CLAUDE_CODE_OAUTH_TOKEN) or set a new ANTHROPIC_API_KEY in nanoclawd.env (read again at once); shown until a request succeeds", h.Detail, ago(r.Time, h.Since))
		case usage.HealthDown:
			p("  %s (since %s ago; shown until a request succeeds)", h.Detail, ago(r.Time, h.Since))
		default:
			retry := "no retry time given"
			if !h.RetryAt.IsZero() {
				retry = "retry in " + until(r.Time, h.RetryAt)
			}
			p("  %s (HTTP %d) since %s ago, %s", h.Detail, h.Status, ago(r.Time, h.Since), retry)
		}
	}
}

// String says which credential agents get, where it came from, and its
// fingerprint.
func (c Credential) String() string {
	if c.Name == "" {
		return "none (agents on the built-in provider cannot answer)"
	}
	from := "the daemon's environment"
	if c.FromEnvFile {
		from = layout.EnvFile
	}
	return fmt.Sprintf("%s from %s (fingerprint %s)", c.Name, from, c.Fingerprint)
}

func spendText(s Spend) string {
	return fmt.Sprintf("%s (%d requests)", usage.CostText(s.USD(), s.CostUSD != nil, len(s.Unpriced) > 0), s.Requests)
}

func budgetText(u *Usage) string {
	s := ""
	if u.Daily != nil {
		s = fmt.Sprintf("$%.2f a day", *u.Daily)
	}
	if u.Monthly != nil {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("$%.2f a month", *u.Monthly)
	}
	if s == "" {
		return "none"
	}
	if u.Over {
		s += " (spent: no model requests)"
	}
	return s
}
