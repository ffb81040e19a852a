package gateway

import (
	"fmt"
	"net/url"
	"sync"
	"time"
)

// Auth schemes of a provider's credential.
const (
	AuthAPIKey = "x-api-key" // X-Api-Key: <credential>
	AuthBearer = "bearer"    // Authorization: Bearer <credential>, no X-Api-Key
)

// BuiltinProvider is the daemon's own model API (ANTHROPIC_BASE_URL) with
// the run's credential: the agent's placeholder is swapped for it.
const BuiltinProvider = "anthropic"

// Target is one upstream a model request may go to: a provider and a
// model, both named as the owner configured them.
type Target struct {
	Provider string
	// Model is our name of the model ("" = the model the request names,
	// unchanged: the SDK's default).
	Model string
	// Upstream is the model as the provider names it (its "models" map);
	// "" = Model.
	Upstream string
	URL      string
	// Credential replaces the agent's placeholder for this provider, sent
	// as Auth says; "" = the run's own credential (the built-in provider).
	Credential string
	Auth       string
	// Builtin: the daemon's own credential, as the run's placeholder
	// stands for it (the built-in provider without a credential of its own).
	Builtin bool
}

// Key names the target in logs, status and the failure board.
func (t Target) Key() string {
	if t.Model == "" {
		return t.Provider
	}
	return t.Provider + "/" + t.Model
}

// Route is where one group's model requests go: Targets[0] is the chosen
// upstream, the rest the fallbacks in the order tried.
type Route struct {
	Targets []Target
	// Timeout bounds the wait for an upstream's response headers and its
	// first bytes, and any silence of its stream after that
	// (agent.apiTimeout; 0 = 60s).
	Timeout time.Duration
	// Board is shared by every run: it remembers which provider and model
	// failed lately, so the next request for it does not wait on it again.
	Board *Board
}

// usesOwn reports whether a target of the route takes the daemon's own
// credential (the built-in provider's).
func (rt Route) usesOwn() bool {
	for _, t := range rt.Targets {
		if t.Builtin {
			return true
		}
	}
	return false
}

// DefaultTimeout is agent.apiTimeout's default.
const DefaultTimeout = 60 * time.Second

func (rt Route) timeout() time.Duration {
	if rt.Timeout > 0 {
		return rt.Timeout
	}
	return DefaultTimeout
}

// Failover statuses: the upstream is overloaded, limited or broken, and
// the same request may well succeed elsewhere.
var failoverStatus = map[int]bool{429: true, 500: true, 502: true, 503: true, 504: true, 529: true}

// skipFor is how long a target that failed is tried only after the
// others: the next request after that tries it first again.
const skipFor = time.Minute

// Board remembers when each provider and model last failed (memoryKey):
// one model overloaded or a request slow on it moves nobody off another.
// Only the upstream's own failures count (a failover status, no answer,
// a refused connection); an answer that refuses the request itself is
// the request's fault. Its zero value is ready.
type Board struct {
	mu     sync.Mutex
	failed map[string]time.Time
}

// Failed records that the target key failed at now.
func (b *Board) Failed(key string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed == nil {
		b.failed = map[string]time.Time{}
	}
	b.failed[key] = now
}

// Succeeded forgets the target's failure.
func (b *Board) Succeeded(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.failed, key)
}

// memoryKey names t on the board for a request asking for model: its
// provider and model, the one the request asks for when t keeps it.
func memoryKey(t Target, model string) string {
	if t.Model != "" || model == "" {
		return t.Key()
	}
	return t.Provider + "/" + model
}

// order is the targets in the order a request for model tries them: those
// that did not fail in the last minute in their configured order, then
// those that did (so a request still reaches one of them when all failed
// lately).
func (rt Route) order(now time.Time, model string) []Target {
	if rt.Board == nil {
		return rt.Targets
	}
	rt.Board.mu.Lock()
	defer rt.Board.mu.Unlock()
	var fresh, lately []Target
	for _, t := range rt.Targets {
		if at, ok := rt.Board.failed[memoryKey(t, model)]; ok && now.Sub(at) < skipFor {
			lately = append(lately, t)
			continue
		}
		fresh = append(fresh, t)
	}
	return append(fresh, lately...)
}

// Served is which target answered a request, for the meter.
type Served struct {
	Target
	// Fallback: not the group's chosen upstream.
	Fallback bool
}

// targetURL is where a request for path (with its query) goes on t.
func targetURL(t Target, path, rawQuery string) (*url.URL, error) {
	u, err := upstreamURL(t.URL)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", t.Provider, err)
	}
	out := *u
	out.Path = joinPath(u.Path, path)
	out.RawQuery = rawQuery
	return &out, nil
}

func joinPath(base, p string) string {
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	return base + p
}
