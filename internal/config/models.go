package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Provider is an upstream that speaks the Messages API (providers.NAME):
// another account, a proxy, or a local model server.
type Provider struct {
	URL        string `json:"url" secret:"url"`
	Credential string `json:"credential" secret:"true"`
	// Auth: "x-api-key" (the default) or "bearer" (Authorization: Bearer
	// and no X-Api-Key).
	Auth string `json:"auth"`
	// Models maps our name of a model to the provider's.
	Models map[string]string `json:"models"`
}

// Fallback is one entry of agent.fallback.
type Fallback struct {
	Provider string `json:"provider"`
	// Model as we name it; "" = the group's own model.
	Model string `json:"model"`
}

// modelProblems checks agent.model, agent.provider, agent.fallback and
// providers.
func modelProblems(c *Config) []PolicyProblem {
	var out []PolicyProblem
	add := func(k, f string, a ...any) { out = append(out, PolicyProblem{k, k + ": " + fmt.Sprintf(f, a...)}) }
	for _, name := range slices.Sorted(maps.Keys(c.Providers)) {
		p, k := c.Providers[name], "providers."+name
		if name == "" || strings.ContainsAny(name, "/ ") {
			add(k, "a provider's name is a word without \"/\" or spaces, e.g. \"local\"")
		}
		if p.URL == "" && name != gateway.BuiltinProvider {
			add(k+".url", "the provider's Messages API address is required, e.g. \"http://127.0.0.1:11434\"")
		} else if u, err := url.Parse(p.URL); p.URL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			add(k+".url", "%q is not an http(s) URL; write it like \"http://127.0.0.1:11434\"", p.URL)
		}
		if p.Auth != "" && p.Auth != gateway.AuthAPIKey && p.Auth != gateway.AuthBearer {
			add(k+".auth", "%q is not \"x-api-key\" or \"bearer\"", p.Auth)
		}
	}
	if err := c.CheckProvider(c.Agent.Provider); err != nil {
		add("agent.provider", "%v", err)
	}
	if c.Agent.Model != "" {
		if err := c.CheckModel(c.Agent.Model); err != nil {
			add("agent.model", "%v", err)
		}
	}
	for i, f := range c.Agent.Fallback {
		k := fmt.Sprintf("agent.fallback[%d]", i)
		if err := c.CheckProvider(f.Provider); err != nil {
			add(k+".provider", "%v", err)
		}
		if f.Model != "" {
			if err := c.CheckModel(f.Model); err != nil {
				add(k+".model", "%v", err)
			}
		}
	}
	return out
}

// CheckProvider says what is wrong with a provider name, or nil.
func (c *Config) CheckProvider(name string) error {
	if _, ok := c.Providers[name]; ok || name == gateway.BuiltinProvider {
		return nil
	}
	return fmt.Errorf("%q is not a provider; known: %s (add it under \"providers\")", name, strings.Join(c.ProviderNames(), ", "))
}

// ProviderNames are the built-in provider and every configured one.
func (c *Config) ProviderNames() []string {
	names := []string{gateway.BuiltinProvider}
	for _, n := range slices.Sorted(maps.Keys(c.Providers)) {
		if n != gateway.BuiltinProvider {
			names = append(names, n)
		}
	}
	return names
}

// KnownModels are the models a group may be set to: every priced model
// and every model a provider lists.
func (c *Config) KnownModels() []string {
	set := map[string]bool{}
	for m := range c.Usage.Prices {
		if _, model, ok := strings.Cut(m, "/"); ok {
			m = model
		}
		set[m] = true
	}
	for _, p := range c.Providers {
		for m := range p.Models {
			set[m] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// CheckModel says what is wrong with a model name, or nil: a model must
// have a price or be listed by a provider.
func (c *Config) CheckModel(name string) error {
	if strings.TrimSpace(name) == "" {
		return fmt.Errorf("the model name is empty")
	}
	if _, ok := c.Usage.Prices.Lookup(name); ok {
		return nil
	}
	for _, p := range c.Providers {
		if _, ok := p.Models[name]; ok {
			return nil
		}
	}
	return fmt.Errorf("%q is not a known model; known: %s (a provider's \"models\" or usage.prices may add one)", name, strings.Join(c.KnownModels(), ", "))
}

// ValidateOverrideModel checks a group override's model and provider
// against the config.
func ValidateOverrideModel(p *security.Policy, c *Config) []PolicyProblem {
	var out []PolicyProblem
	if p.Model != "" {
		if err := c.CheckModel(p.Model); err != nil {
			out = append(out, PolicyProblem{"model", "model: " + err.Error()})
		}
	}
	if p.Provider != "" {
		if err := c.CheckProvider(p.Provider); err != nil {
			out = append(out, PolicyProblem{"provider", "provider: " + err.Error()})
		}
	}
	return out
}

// Route is where the relay sends a group's model requests: its provider
// and model (eff's), then agent.fallback, each entry once. upstream is
// the daemon's ANTHROPIC_BASE_URL ("" = the Anthropic API).
func (c *Config) Route(eff security.Effective, upstream string) gateway.Route {
	rt := gateway.Route{Timeout: c.Agent.APITimeout.D()}
	seen := map[string]bool{}
	add := func(provider, model string) {
		t := c.target(provider, model, upstream)
		if !seen[t.Key()] {
			seen[t.Key()] = true
			rt.Targets = append(rt.Targets, t)
		}
	}
	add(eff.Provider, eff.Model)
	for _, f := range c.Agent.Fallback {
		add(f.Provider, cmpOr(f.Model, eff.Model))
	}
	return rt
}

// target is one provider and model as the relay reaches it.
func (c *Config) target(provider, model, upstream string) gateway.Target {
	if provider == "" {
		provider = gateway.BuiltinProvider
	}
	p := c.Providers[provider]
	t := gateway.Target{Provider: provider, Model: model, Upstream: p.Models[model], URL: p.URL, Credential: p.Credential, Auth: cmpOr(p.Auth, gateway.AuthAPIKey)}
	if provider == gateway.BuiltinProvider && p.URL == "" {
		t.URL = cmpOr(upstream, gateway.DefaultUpstream)
	}
	// The built-in provider without a credential of its own uses the
	// daemon's (the run's placeholder swapped); any other provider gets
	// only its own, none if it has none.
	t.Builtin = provider == gateway.BuiltinProvider && p.Credential == ""
	return t
}

// OwnCredential reports whether a group on provider (its override's; "" =
// agent.provider) needs the daemon's own model credential: the built-in
// provider without a credential of its own in providers. Any other takes
// its provider's, or none (a local model server).
func (c *Config) OwnCredential(provider string) bool {
	return c.target(cmpOr(provider, c.Agent.Provider), "", "").Builtin
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
