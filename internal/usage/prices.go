// Package usage counts what the model costs: the token usage the relay
// reads from each answer (gateway.Tokens), priced by usage.prices (this file),
// kept per request in SQLite and summed per group (store.go), held
// against each group's budget (budget.go), and what the model API last
// said about the daemon's credential (health.go). Meter (meter.go) is the
// relay's meter of one run: it records, holds the group to its budget and
// tells the main chat.
package usage

import (
	"github.com/nanoclawd/nanoclawd/internal/gateway"

	"regexp"
	"strings"
)

// Price is what a model costs, in USD per million tokens.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheWrite float64 `json:"cacheWrite"`
	CacheRead  float64 `json:"cacheRead"`
}

// Cost is what t costs at p, in USD.
func (p Price) Cost(t gateway.Tokens) float64 {
	return (float64(t.Input)*p.Input + float64(t.Output)*p.Output +
		float64(t.CacheWrite)*p.CacheWrite + float64(t.CacheRead)*p.CacheRead) / 1e6
}

// Prices is usage.prices: a price per model id.
type Prices map[string]Price

// DefaultPrices are Anthropic's list prices (USD per million tokens) of
// the Claude models current in November 2026; cache writes at the
// 5-minute rate. Keys are model ids without a date: Lookup finds
// "claude-sonnet-4-5-20250929" under "claude-sonnet-4-5". The 5.5 family
// is what the pinned SDK picks by default; its rates are those Anthropic
// lists for the tier (opus, sonnet, haiku), the same as 4.5's.
func DefaultPrices() Prices {
	opus45 := Price{Input: 5, Output: 25, CacheWrite: 6.25, CacheRead: 0.50}
	opus4 := Price{Input: 15, Output: 75, CacheWrite: 18.75, CacheRead: 1.50}
	sonnet := Price{Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.30}
	return Prices{
		"claude-opus-5-5":   opus45,
		"claude-sonnet-5-5": sonnet,
		"claude-haiku-5-5":  {Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.10},
		"claude-opus-4-7":   opus45,
		"claude-opus-4-6":   opus45,
		"claude-opus-4-5":   opus45,
		"claude-opus-4-1":   opus4,
		"claude-opus-4":     opus4,
		"claude-sonnet-4-6": sonnet,
		"claude-sonnet-4-5": sonnet,
		"claude-sonnet-4":   sonnet,
		"claude-3-7-sonnet": sonnet,
		"claude-haiku-4-5":  {Input: 1, Output: 5, CacheWrite: 1.25, CacheRead: 0.10},
		"claude-3-5-haiku":  {Input: 0.80, Output: 4, CacheWrite: 1, CacheRead: 0.08},
		"claude-3-haiku":    {Input: 0.25, Output: 1.25, CacheWrite: 0.30, CacheRead: 0.03},
	}
}

var dateSuffix = regexp.MustCompile(`-\d{8}$`)

// Lookup finds model's price: under its exact id, else under the id
// without a date suffix, else under the longest key it extends at a "-"
// ("claude-opus-4-0" under "claude-opus-4"). ok is false for a model
// usage.prices does not know: its tokens are counted, its cost is not.
func (ps Prices) Lookup(model string) (p Price, ok bool) {
	if p, ok := ps[model]; ok {
		return p, true
	}
	bare := dateSuffix.ReplaceAllString(model, "")
	if p, ok := ps[bare]; ok {
		return p, true
	}
	best := ""
	for k := range ps {
		if strings.HasPrefix(bare, k+"-") && len(k) > len(best) {
			best = k
		}
	}
	if best == "" {
		return Price{}, false
	}
	return ps[best], true
}
