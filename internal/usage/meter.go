package usage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/failure"
	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/rs/zerolog"
)

// Meter is the relay's meter for one run (gateway.Meter): it records
// each answer's usage, holds the group to its budget, and tells the main
// chat, once, when the budget nears or reaches its limit or the model
// API refuses the daemon's credential.
type Meter struct {
	env   MeterEnv
	group string
	main  bool
	run   string

	mu      sync.Mutex
	stopped string // why the relay refused or the API rejected this run's requests
	refused bool   // an upstream answered 401 or 403 to this run
}

// MeterEnv is what a run's meter reads and tells outside this package.
type MeterEnv struct {
	Store    *Store
	Groups   GroupLookup
	Settings func() Settings // as the config is now (it may be reloaded)
	Main     MainChat
	Log      zerolog.Logger
	// Checks counts the budget checks that follow answers on their own
	// time (Done): they write to SQLite, so the daemon waits for them
	// before it closes the store.
	Checks *sync.WaitGroup
}

// GroupLookup reads a group's override as it is now (its budget).
type GroupLookup interface {
	ByFolder(ctx context.Context, folder string) (groups.Group, error)
}

// MainChat queues a notice for the main chat inside a transaction (the
// outbox's TellMainTx).
type MainChat interface {
	TellMainTx(ctx context.Context, tx *store.Tx, text string) error
}

// Settings are the config's values a meter reads.
type Settings struct {
	Budget   security.Budget // agent.budget
	Location *time.Location  // the configured time zone
	Prices   Prices          // usage.prices
	AgentEnv []string        // agent.env: which credentials agents get
}

// NewMeter is the meter of one run of g, with a run id of its own.
func NewMeter(env MeterEnv, g groups.Group) *Meter {
	b := make([]byte, 6)
	rand.Read(b)
	return &Meter{env: env, group: g.Folder, main: g.IsMain, run: hex.EncodeToString(b)}
}

// Run is the run's id in the usage records.
func (m *Meter) Run() string { return m.run }

// StoppedBy is why this run's model requests could not be made ("" if
// they could): a run that failed for it is not retried.
func (m *Meter) StoppedBy() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopped
}

// CredentialRefused reports whether an upstream answered 401 or 403 to a
// request of this run: only then was a credential refused.
func (m *Meter) CredentialRefused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused
}

func (m *Meter) stop(why string) {
	m.mu.Lock()
	m.stopped = why
	m.mu.Unlock()
}

// spends is where the group stands at `at` in each period it has a limit
// for: the budget as it is now (a limit raised during a run applies to
// its next request).
func (m *Meter) spends(ctx context.Context, at time.Time) []Standing {
	g, err := m.env.Groups.ByFolder(ctx, m.group)
	if err != nil {
		m.env.Log.Error().Err(err).Str("group", m.group).Msg("read the group's budget; not applied")
		return nil
	}
	cfg := m.env.Settings()
	b := security.EffectiveBudget(cfg.Budget, g.Security, g.IsMain)
	out, err := m.env.Store.Standings(ctx, m.group, Periods(at, cfg.Location, b.Daily, b.Monthly))
	if err != nil {
		m.env.Log.Error().Err(err).Str("group", m.group).Msg("sum the group's spend; its budget is not applied")
	}
	return out
}

// Admit implements gateway.Meter: a group over a limit gets no request
// until the day or month turns.
func (m *Meter) Admit(ctx context.Context) *gateway.Refusal {
	for _, s := range m.spends(ctx, time.Now()) {
		if s.Level != Over {
			continue
		}
		m.notice(ctx, s, "over", m.overText(s))
		msg := fmt.Sprintf("nanoclaw: the %s model budget of group %s is spent (%s of %s); no more model requests until %s. Tell the user; the owner was told and can raise the limit.",
			s.Name, m.group, usd(s.Spent), usd(s.Limit), m.turns(s.Period))
		m.stop(msg)
		// As the API answers an organisation over its spend limit: 400,
		// which the SDK does not retry.
		return &gateway.Refusal{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: msg}
	}
	return nil
}

// Done implements gateway.Meter: the answer's usage is recorded before
// the agent sees the answer end; then the budget is checked.
func (m *Meter) Done(s gateway.Served, model string, t gateway.Tokens) {
	req := Request{Time: time.Now(), Group: m.group, Run: m.run, Provider: s.Provider, Model: model, Tokens: t}.PricedBy(m.env.Settings().Prices)
	if err := m.env.Store.Record(context.Background(), req); err != nil {
		m.env.Log.Error().Err(err).Msg("model usage not recorded")
		return
	}
	if !req.Priced {
		m.env.Log.Warn().Str("group", m.group).Str("model", model).Msg("a model without a price in usage.prices: its tokens are counted, not its cost")
	}
	// The answer ends for the agent once Done returns: the budget's sums
	// and notices wait for no one, but are counted.
	m.env.Checks.Add(1)
	go func() {
		defer m.env.Checks.Done()
		m.checkBudget(req.Time)
	}()
}

// checkBudget warns the main chat once when the group's spend reaches 80 %
// of a limit, and tells it once when it reaches the limit.
func (m *Meter) checkBudget(at time.Time) {
	ctx := context.Background()
	for _, s := range m.spends(ctx, at) {
		switch s.Level {
		case Over:
			m.notice(ctx, s, "over", m.overText(s))
		case Warn:
			m.notice(ctx, s, "warn", fmt.Sprintf("[BUDGET WARNING] Group %s has spent %s of its %s model budget of %s (%.0f %%). At the limit its agent stops until %s. %s",
				m.group, usd(s.Spent), s.Name, usd(s.Limit), 100*s.Spent/s.Limit, m.turns(s.Period), m.raise(s.Period)))
		}
	}
}

func (m *Meter) overText(s Standing) string {
	return fmt.Sprintf("[BUDGET] Group %s has spent its %s model budget: %s of %s. Its agent gets no more model requests until %s. %s",
		m.group, s.Name, usd(s.Spent), usd(s.Limit), m.turns(s.Period), m.raise(s.Period))
}

// Answered implements gateway.Meter: the model API's verdict on the
// credential and its rate limits.
func (m *Meter) Answered(status int, h http.Header, s gateway.Served) {
	ctx := context.Background()
	switch {
	case status >= 200 && status < 300:
		if err := m.env.Store.Resolved(ctx, HealthCredential, HealthRate, HealthDown); err != nil {
			m.env.Log.Error().Err(err).Msg("forget a problem of the model API")
		}
		m.served(ctx, s)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		m.mu.Lock()
		m.stopped, m.refused = fmt.Sprintf("the model API refused the credential (HTTP %d)", status), true
		m.mu.Unlock()
		detail := fmt.Sprintf("the model API refused nanoclawd's credential (HTTP %d)", status)
		text := fmt.Sprintf("[CREDENTIAL] The model API refused nanoclawd's credential (HTTP %d, first seen in group %s): the token has expired or the key was revoked, so no agent can answer. "+
			"To fix it: run 'claude setup-token' and put the token in nanoclawd.env as CLAUDE_CODE_OAUTH_TOKEN=…, or put a new ANTHROPIC_API_KEY=… there: nanoclawd uses it from the next run on, no restart (or run 'nanoclawd setup'). "+
			"'nanoclawd status' shows this until a request succeeds.", status, m.group)
		if s.Provider != gateway.BuiltinProvider {
			// An owner's provider: its own credential, in the config.
			detail = fmt.Sprintf("provider %s refused its credential (HTTP %d)", s.Provider, status)
			text = fmt.Sprintf("[CREDENTIAL] Provider %s refused its credential (HTTP %d, first seen in group %s), so the groups it serves get no answers from it. "+
				"To fix it: put a valid key in providers.%s.credential in the config (a ${VAR} from nanoclawd.env is best). "+
				"'nanoclawd status' shows this until a request succeeds.", s.Provider, status, m.group, s.Provider)
		} else if env := m.env.Settings().AgentEnv; !security.CredentialSet(env, os.Getenv) {
			// Nothing was refused: there was nothing to send.
			detail = fmt.Sprintf("no model credential reaches the agents (the model API answered HTTP %d to a request without one)", status)
			text = fmt.Sprintf("[CREDENTIAL] No model credential reaches the agents, so none can answer (first seen in group %s). "+
				"To fix it: %s (nanoclawd reads the config and nanoclawd.env again by itself).", m.group, failure.MissingCredential(env, os.Getenv))
		}
		h := Health{Kind: HealthCredential, Status: status, Detail: detail, Since: time.Now()}
		if _, err := m.env.Store.Problem(ctx, h, m.mainNotice(text)); err != nil {
			m.env.Log.Error().Err(err).Msg("record that the model API refused the credential")
		}
	case status == http.StatusTooManyRequests || status == 529:
		h := Health{Kind: HealthRate, Status: status, Since: time.Now(), RetryAt: retryAt(h, time.Now())}
		h.Detail = "rate limited"
		if status == 529 {
			h.Detail = "overloaded"
		}
		if _, err := m.env.Store.Problem(ctx, h, nil); err != nil {
			m.env.Log.Error().Err(err).Msg("record the model API's rate limit")
		}
	}
}

// notice tells the main chat text, once per group, kind and period.
func (m *Meter) notice(ctx context.Context, s Standing, kind, text string) {
	if _, err := m.env.Store.Once(ctx, m.group, s.Name+"-"+kind, s.Key, m.mainNotice(text)); err != nil {
		m.env.Log.Error().Err(err).Str("group", m.group).Msg("tell the main chat about the budget")
	}
}

// mainNotice queues text for the main chat inside a transaction.
func (m *Meter) mainNotice(text string) func(context.Context, *store.Tx) error {
	return func(ctx context.Context, tx *store.Tx) error { return m.env.Main.TellMainTx(ctx, tx, text) }
}

// raise says how the owner raises the group's limit of p.
func (m *Meter) raise(p Period) string {
	own := fmt.Sprintf("'nanoclawd groups set-security %s --file OVERRIDE.json' holding {\"budget\": {\"%s\": USD}} and the rest of its override", m.group, p.Name)
	if m.main {
		return "To raise it: " + own + " (the main group's budget is only its own)."
	}
	return fmt.Sprintf("To raise it: agent.budget.%s in the config (every group), or this group's own with %s.", p.Name, own)
}

// turns says when p ends, in local time.
func (m *Meter) turns(p Period) string {
	end := p.End.In(m.env.Settings().Location)
	if p.Name == "daily" {
		return "midnight (" + end.Format("Mon 2 Jan") + ", local time)"
	}
	return end.Format("Mon 2 Jan 2006") + " (local time)"
}

// usd writes an amount of money, with the cents that matter for small ones.
func usd(v float64) string {
	if v != 0 && v < 1 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// retryAt reads when the API says to try again: retry-after, in seconds
// or as a date.
func retryAt(h http.Header, now time.Time) time.Time {
	v := h.Get("Retry-After")
	if s, err := strconv.Atoi(v); err == nil {
		return now.Add(time.Duration(s) * time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		return t
	}
	return time.Time{}
}

// Failed implements gateway.Meter: no upstream answered, which status
// and doctor show until one does. The chat hears of it through the
// agent's error (package failure, told by the router).
func (m *Meter) Failed(why string) {
	if gateway.Limited(why) {
		return // Answered kept the rate limit, with its retry time
	}
	h := Health{Kind: HealthDown, Status: http.StatusGatewayTimeout, Detail: "not answering: " + why, Since: time.Now()}
	if _, err := m.env.Store.Problem(context.Background(), h, nil); err != nil {
		m.env.Log.Error().Err(err).Msg("record that the model API is not answering")
	}
}

// served keeps track of a group on a fallback: the main chat is told
// once when it has been for TellAfter, and once when it is back.
func (m *Meter) served(ctx context.Context, s gateway.Served) {
	var err error
	if s.Fallback {
		err = m.env.Store.OnFallback(ctx, m.group, s.Key(), time.Now(), func(ctx context.Context, tx *store.Tx, since time.Time) error {
			return m.env.Main.TellMainTx(ctx, tx, fmt.Sprintf("[MODEL] Group %s has been served by the fallback %s since %s: its chosen model does not answer. "+
				"'nanoclawd status' shows it; you will hear when it is back.", m.group, s.Key(), since.In(m.env.Settings().Location).Format("15:04")))
		})
	} else {
		err = m.env.Store.OnChosen(ctx, m.group, func(ctx context.Context, tx *store.Tx, upstream string) error {
			return m.env.Main.TellMainTx(ctx, tx, fmt.Sprintf("[MODEL] Group %s is back on its chosen model %s (it was served by %s).", m.group, s.Key(), upstream))
		})
	}
	if err != nil {
		m.env.Log.Error().Err(err).Str("group", m.group).Msg("record which upstream served the group")
	}
}
