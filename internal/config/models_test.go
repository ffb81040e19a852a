package config

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

const twoProviders = `"providers": {
	"local": {"url": "http://127.0.0.1:11434", "auth": "bearer", "models": {"qwen": "qwen3-coder:30b"}},
	"work": {"url": "https://api.example.com/anthropic", "credential": "sk-work", "models": {"claude-sonnet-4-5": "sonnet-latest"}}}`

// Each model key says what is wrong, where, and what is known.
func TestModelKeyErrors(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"agent": {"model": "gpt-9"}}`, `agent.model: "gpt-9" is not a known model; known: claude-3-5-haiku,`},
		{`{"agent": {"provider": "nope"}}`, `agent.provider: "nope" is not a provider; known: anthropic`},
		{`{"agent": {"fallback": [{"provider": "elsewhere", "model": "claude-haiku-4-5"}]}}`, `agent.fallback[0].provider: "elsewhere" is not a provider`},
		{`{"agent": {"apiTimeout": "0s"}}`, `agent.apiTimeout is 0, below the minimum 0`},
		{`{"providers": {"local": {"models": {}}}}`, `providers.local.url: the provider's Messages API address is required`},
		{`{"providers": {"local": {"url": "127.0.0.1:11434"}}}`, `providers.local.url: "127.0.0.1:11434" is not an http(s) URL`},
		{`{"providers": {"local": {"url": "http://127.0.0.1:1", "auth": "basic"}}}`, `providers.local.auth: "basic" is not "x-api-key" or "bearer"`},
		{`{"hostSecurity": {"model": "claude-haiku-4-5"}}`, `hostSecurity.model: every group's model is agent.model`},
	} {
		_, err := load(t, c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.body, err, c.want)
		}
	}
	cfg, err := load(t, `{"agent": {"model": "qwen", "provider": "local", "fallback": [{"provider": "anthropic"}]}, `+twoProviders+`}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.KnownModels(), ","); !strings.Contains(got, "qwen") || !strings.Contains(got, "claude-opus-5-5") {
		t.Errorf("known models %s", got)
	}
	if err := cfg.CheckModel("claude-sonnet-4-5-20250929"); err != nil {
		t.Errorf("a dated id of a priced model: %v", err)
	}
	if probs := ValidateOverrideModel(&security.Policy{Model: "gpt-9", Provider: "nope"}, cfg); len(probs) != 2 {
		t.Errorf("override problems %+v", probs)
	}
}

// The route is the group's provider and model, then each fallback once;
// each target carries its provider's address, name for the model and
// credential, and only the built-in provider the daemon's own.
func TestRoute(t *testing.T) {
	cfg, err := load(t, `{"agent": {"apiTimeout": "5s", "fallback": [{"provider": "work"}, {"provider": "anthropic", "model": "claude-haiku-4-5"},
		{"provider": "work", "model": "claude-sonnet-4-5"}, {"provider": "local", "model": "qwen"}]}, `+twoProviders+`}`)
	if err != nil {
		t.Fatal(err)
	}
	rt := cfg.Route(security.Effective{Model: "claude-sonnet-4-5", Provider: "anthropic"}, "http://127.0.0.1:9/")
	want := []gateway.Target{
		{Provider: "anthropic", Model: "claude-sonnet-4-5", URL: "http://127.0.0.1:9/", Auth: "x-api-key", Builtin: true},
		{Provider: "work", Model: "claude-sonnet-4-5", Upstream: "sonnet-latest", URL: "https://api.example.com/anthropic", Credential: "sk-work", Auth: "x-api-key"},
		{Provider: "anthropic", Model: "claude-haiku-4-5", URL: "http://127.0.0.1:9/", Auth: "x-api-key", Builtin: true},
		{Provider: "local", Model: "qwen", Upstream: "qwen3-coder:30b", URL: "http://127.0.0.1:11434", Auth: "bearer"},
	}
	if rt.Timeout.Seconds() != 5 || len(rt.Targets) != len(want) {
		t.Fatalf("route %+v", rt)
	}
	for i := range want {
		if rt.Targets[i] != want[i] {
			t.Errorf("target %d: %+v, want %+v", i, rt.Targets[i], want[i])
		}
	}
	if def := cfg.Route(security.Effective{}, ""); def.Targets[0].URL != gateway.DefaultUpstream || !def.Targets[0].Builtin {
		t.Errorf("the default route %+v", def.Targets[0])
	}
	b, _ := json.Marshal(cfg.Masked())
	if strings.Contains(string(b), "sk-work") {
		t.Errorf("the config as status prints it shows a provider's credential: %s", b)
	}
}
