package usage

import (
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
)

func TestPricesLookup(t *testing.T) {
	ps := DefaultPrices()
	for model, want := range map[string]float64{
		"claude-sonnet-4-5":          3,
		"claude-sonnet-4-5-20250929": 3,
		"claude-opus-4-20250514":     15,
		"claude-opus-4-0":            15,
		"claude-opus-4-6":            5,
		"claude-haiku-4-5-20251001":  1,
	} {
		if p, ok := ps.Lookup(model); !ok || p.Input != want {
			t.Errorf("%s: %+v %v, want input %g", model, p, ok, want)
		}
	}
	for _, model := range []string{"gpt-4o", "claude-opus", ""} {
		if p, ok := ps.Lookup(model); ok {
			t.Errorf("%s has a price: %+v", model, p)
		}
	}
	cost := Price{Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}.Cost(gateway.Tokens{Input: 1e6, Output: 2e6, CacheWrite: 4e6, CacheRead: 1e7})
	if want := 3 + 30 + 15 + 3.0; cost < want-1e-9 || cost > want+1e-9 {
		t.Errorf("cost %g, want %g", cost, want)
	}
}
