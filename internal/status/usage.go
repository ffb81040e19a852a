package status

import (
	"fmt"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/fit"
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
func usageSection(t *text, r Report) {
	modelSection(t, r)
	t.line("\nModel usage, today and this month ('nanoclawd usage' has the tokens)")
	rows := [][]string{{"GROUP", "TODAY", "THIS MONTH", "BUDGET"}}
	for _, g := range r.Groups {
		u := g.Usage
		if u == nil {
			u = &Usage{}
		}
		rows = append(rows, []string{g.Folder, spendText(u.Today), spendText(u.Month), budgetText(u)})
	}
	t.table(rows...)
	t.line("\n%s", fit.Wrap("Model credential:", r.Credential.String(), "  "))
	if len(r.ModelAPI) == 0 {
		t.line("\nModel API: no problem seen")
		return
	}
	t.line("\nModel API (each problem is shown until a request succeeds)")
	for _, h := range r.ModelAPI {
		switch h.Kind {
		case usage.HealthCredential:
			t.line("  %s, since %s ago", fit.Cut(h.Detail, fit.Width-30), ago(r.Time, h.Since))
			t.line("    fix: a new ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN) in nanoclawd.env (read again at once)")
		case usage.HealthDown:
			t.line("%s", fit.Wrap(fmt.Sprintf("  since %s ago:", ago(r.Time, h.Since)), h.Detail, "    "))
		default:
			retry := "no retry time given"
			if !h.RetryAt.IsZero() {
				retry = "retry in " + until(r.Time, h.RetryAt)
			}
			t.line("  %s (HTTP %d) since %s ago, %s", h.Detail, h.Status, ago(r.Time, h.Since), retry)
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

// spendText is a span's cost, with the decimals that keep it from reading
// $0.00, and its requests.
func spendText(s Spend) string {
	unit := "requests"
	if s.Requests == 1 {
		unit = "request"
	}
	return fmt.Sprintf("%s (%d %s)", usage.CostText(s.USD(), s.CostUSD != nil, len(s.Unpriced) > 0), s.Requests, unit)
}

func budgetText(u *Usage) string {
	var s []string
	if u.Daily != nil {
		s = append(s, fmt.Sprintf("$%.2f/day", *u.Daily))
	}
	if u.Monthly != nil {
		s = append(s, fmt.Sprintf("$%.2f/month", *u.Monthly))
	}
	if len(s) == 0 {
		return "none"
	}
	if u.Over {
		return "spent: " + strings.Join(s, ", ")
	}
	return strings.Join(s, ", ")
}
