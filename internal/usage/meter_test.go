package usage_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
	"github.com/rs/zerolog"
)

// folders is a group lookup over fixed groups.
type folders map[string]groups.Group

func (f folders) ByFolder(_ context.Context, folder string) (groups.Group, error) {
	return f[folder], nil
}

// mainChat keeps what the meter told the main chat.
type mainChat struct {
	mu   sync.Mutex
	told []string
}

func (m *mainChat) TellMainTx(_ context.Context, _ *store.Tx, text string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.told = append(m.told, text)
	return nil
}

// A group whose spend reached its daily limit gets no model request, as
// an invalid request the SDK does not retry, and the main chat hears of
// it once, however often the group asks.
func TestMeterHoldsAGroupToItsBudget(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	limit := 1.0
	prices := usage.Prices{"m": {Output: 1e6}} // a dollar per token
	settings := func() usage.Settings {
		return usage.Settings{Budget: security.Budget{Daily: &limit}, Location: time.UTC, Prices: prices}
	}
	fam := groups.Group{Folder: "family", JID: "fam@g.us"}
	main := &mainChat{}
	m := usage.NewMeter(usage.MeterEnv{Store: s, Groups: folders{"family": fam}, Settings: settings, Main: main, Log: zerolog.Nop()}, fam)
	if ref := m.Admit(ctx); ref != nil || m.StoppedBy() != "" {
		t.Fatalf("a group under its budget was refused: %+v", ref)
	}
	req := usage.Request{Time: time.Now(), Group: "family", Run: m.Run(), Model: "m", Tokens: gateway.Tokens{Output: 2}}.PricedBy(prices)
	if err := s.Record(ctx, req); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		ref := m.Admit(ctx)
		if ref == nil || ref.Status != http.StatusBadRequest || !strings.Contains(ref.Message, "daily model budget of group family is spent ($2.00 of $1.00)") {
			t.Fatalf("over its budget: %+v", ref)
		}
	}
	if !strings.Contains(m.StoppedBy(), "is spent") {
		t.Errorf("StoppedBy %q", m.StoppedBy())
	}
	if len(main.told) != 1 || !strings.HasPrefix(main.told[0], "[BUDGET] Group family has spent its daily model budget: $2.00 of $1.00.") {
		t.Errorf("the main chat was told %q", main.told)
	}
}

// The budget check after an answer runs on its own time but is counted:
// once Checks is waited for, the main chat has been told, so a stopping
// daemon closes SQLite only after the notice is written.
func TestMeterChecksAfterAnAnswerAreWaitedFor(t *testing.T) {
	s, _ := openStore(t)
	limit := 1.0
	prices := usage.Prices{"m": {Output: 1e5}} // ten cents a token
	settings := func() usage.Settings {
		return usage.Settings{Budget: security.Budget{Daily: &limit}, Location: time.UTC, Prices: prices}
	}
	fam := groups.Group{Folder: "family", JID: "fam@g.us"}
	main := &mainChat{}
	var checks sync.WaitGroup
	m := usage.NewMeter(usage.MeterEnv{Store: s, Groups: folders{"family": fam}, Settings: settings, Main: main, Log: zerolog.Nop(), Checks: &checks}, fam)
	m.Done(gateway.Served{Target: gateway.Target{Provider: gateway.BuiltinProvider}}, "m", gateway.Tokens{Output: 9}) // $0.90 of $1.00
	checks.Wait()
	main.mu.Lock()
	defer main.mu.Unlock()
	if len(main.told) != 1 || !strings.HasPrefix(main.told[0], "[BUDGET WARNING] Group family has spent $0.9000 of its daily model budget of $1.00 (90 %).") {
		t.Errorf("once the checks are done, the main chat was told %q", main.told)
	}
}
