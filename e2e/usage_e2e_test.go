package e2e_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// What every request of the mock model API reports, and the price the
// config gives its model: each request costs (1000×2 + 500×10 + 200×2.5 +
// 3000×0.2) / 1e6 = $0.0081.
var (
	mockUsage   = mockapi.Usage{Input: 1000, Output: 500, CacheWrite: 200, CacheRead: 3000}
	priceConfig = `"usage": {"prices": {"claude-sonnet-4-5": {"input": 2, "output": 10, "cacheWrite": 2.5, "cacheRead": 0.2}}}`
)

const requestCost = 0.0081

// usageInstall is an install whose stand-in agents call the mock model
// API through the relay, as the SDK does (testagent's "api N").
func usageInstall(t *testing.T, mock *mockapi.Server, agentExtra string) (*e2e.Install, string) {
	t.Helper()
	realKey := "sk-ant-real-" + randHex(t)
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "timeout": "60s", "idleTimeout": "60s",
			"env": ["ANTHROPIC_API_KEY", "TESTAGENT_LOG"]` + agentExtra,
		Top: priceConfig,
		Env: []string{"ANTHROPIC_API_KEY=" + realKey, "ANTHROPIC_BASE_URL=" + mock.URL,
			"TESTAGENT_LOG=" + filepath.Join(t.TempDir(), "agent.log")},
	})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	return in, realKey
}

func usageJSON(t *testing.T, in *e2e.Install, args ...string) map[string]usage.Total {
	t.Helper()
	out := in.CLI(append([]string{"usage", "--json"}, args...)...)
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("usage --json: %v\n%s", err, out)
	}
	for _, o := range list {
		for _, k := range []string{"group", "requests", "inputTokens", "outputTokens", "cacheWriteTokens", "cacheReadTokens", "costUSD"} {
			if _, ok := o[k]; !ok {
				t.Errorf("usage --json lacks %q: %s", k, out)
			}
		}
	}
	var totals []usage.Total
	json.Unmarshal([]byte(out), &totals)
	m := map[string]usage.Total{}
	for _, x := range totals {
		m[x.Group] = x
	}
	return m
}

// assertCompressed fails unless the mock answered each request so far in
// the encodings given, each asked for as it is (identity): otherwise the
// test did not meter what it says it did.
func assertCompressed(t *testing.T, mock *mockapi.Server, encodings ...string) {
	t.Helper()
	var got []string
	for i, r := range mock.Log() {
		got = append(got, r.Encoding)
		if ae := r.Header.Get("Accept-Encoding"); ae != "identity" {
			t.Errorf("request %d asked the API for %q, not identity", i, ae)
		}
	}
	if !slices.Equal(got, encodings) {
		t.Fatalf("the mock answered in %q, want %q", got, encodings)
	}
}

func countMessages(in *e2e.Install, chat, prefix string) int {
	n := 0
	for _, m := range e2e.InChat(in.AllSent(), chat) {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// Every request of a confined group and of the main group passes the
// relay, which counts exactly the tokens the model API reported — the
// final output count, not added to message_start's — at the configured
// price, also when the API compresses its answers although the relay asked
// for them as they are (gzip for family, br for main); the main group's
// agent holds a placeholder, not the key.
func TestUsageCountedAtTheRelay(t *testing.T) {
	mock := mockapi.New(t)
	mock.SetUsage(mockUsage)
	in, realKey := usageInstall(t, mock, "")

	mock.SetEncoding("gzip")
	in.Post("local:family", "Ann", "api 2")
	in.WaitFor("local:family", func(s string) bool { return strings.HasPrefix(s, "api 2 ok") })
	mock.SetEncoding("br")
	in.Post("local:main", "Owner", "api 1")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "api 1 ok") })
	assertCompressed(t, mock, "gzip", "gzip", "br")

	got := usageJSON(t, in)
	for group, n := range map[string]int64{"family": 2, "main": 1} {
		g := got[group]
		want := gateway.Tokens{Input: n * 1000, Output: n * 500, CacheWrite: n * 200, CacheRead: n * 3000}
		if g.Requests != n || g.Tokens != want || math.Abs(g.CostUSD-float64(n)*requestCost) > 1e-9 {
			t.Errorf("%s: %+v, want %d requests, %+v, $%g", group, g, n, want, float64(n)*requestCost)
		}
	}
	if only := usageJSON(t, in, "--group", "main", "--since", "1h"); len(only) != 1 || only["main"].Requests != 1 {
		t.Errorf("usage --group main --since 1h: %+v", only)
	}
	for i, r := range mock.Log() {
		if r.Header.Get("X-Api-Key") != realKey {
			t.Errorf("request %d reached the API with key %q, not the one the relay adds", i, r.Header.Get("X-Api-Key"))
		}
	}
	rep := statusUntil(t, in, "the spend of family", func(r status.Report) bool {
		u := group(r, "family").Usage
		return u != nil && u.Today.Requests == 2 && u.Month.Requests == 2
	})
	if u := group(rep, "main").Usage; u == nil || u.Today.Requests != 1 || u.Daily != nil {
		t.Errorf("main's line in status: %+v", u)
	}
	if text := in.CLI("status"); !strings.Contains(text, "Model usage") || !strings.Contains(text, "$0.02 (2 requests)") {
		t.Errorf("status text lacks the usage lines:\n%s", text)
	}

	in.Post("local:main", "Owner", "env")
	env := strings.Join(e2e.InChat(in.WaitFor("local:main", func(s string) bool { return strings.Contains(s, "NANOCLAW_GROUP_FOLDER=") }), "local:main"), "\n")
	if strings.Contains(env, realKey) || !strings.Contains(env, "ANTHROPIC_API_KEY=nanoclaw-placeholder-") || !strings.Contains(env, "ANTHROPIC_BASE_URL=http://127.0.0.1:") {
		t.Errorf("the main group's agent does not hold a placeholder pointed at its relay:\n%s", env)
	}
}

// A group over its daily budget gets no more model requests: the relay
// answers its agent with a readable error, the run is not retried, and
// the main chat gets one [BUDGET] message however often the group asks.
// The main group has no budget but its own, and is warned at 80 % of it.
func TestBudgetStopsAGroup(t *testing.T) {
	mock := mockapi.New(t)
	mock.SetUsage(mockUsage)
	mock.SetEncoding("gzip") // an unkind upstream: metered all the same
	in, _ := usageInstall(t, mock, `, "budget": {"daily": 0.005}`)
	override := filepath.Join(t.TempDir(), "main.json")
	os.WriteFile(override, []byte(`{"budget": {"daily": 0.009}}`), 0o600)
	in.CLI("groups", "set-security", "main", "--file", override)

	in.Post("local:family", "Ann", "api 1") // $0.0081: over $0.005 once it is counted
	in.WaitFor("local:family", func(s string) bool { return strings.HasPrefix(s, "api 1 ok") })
	in.WaitFor("local:main", func(s string) bool {
		return strings.HasPrefix(s, "[BUDGET] Group family") && strings.Contains(s, "$0.0081 of $0.0050") && strings.Contains(s, "agent.budget.daily")
	})
	for i := 0; i < 2; i++ {
		in.Post("local:family", "Ann", "api 1")
		refused := in.WaitNext("local:family", func(s string) bool { return strings.Contains(s, "could not answer") })
		if !strings.Contains(refused.Text, "daily model budget of group family is spent") {
			t.Errorf("the group was not told why: %q", refused.Text)
		}
	}
	if n := len(mock.Log()); n != 1 {
		t.Errorf("the model API got %d requests, want 1: the group's budget was spent after the first", n)
	}
	assertCompressed(t, mock, "gzip")
	// The main group spends past agent.budget's $0.005 (not its limit) and
	// is warned at 80 % of its own $0.009.
	in.Post("local:main", "Owner", "api 1")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "api 1 ok") })
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "[BUDGET WARNING] Group main") })
	if n := countMessages(in, "local:main", "[BUDGET] "); n != 1 {
		t.Errorf("the main chat got %d [BUDGET] messages, want 1", n)
	}
	rep := statusUntil(t, in, "family over budget", func(r status.Report) bool { u := group(r, "family").Usage; return u != nil && u.Over })
	if u := group(rep, "main").Usage; u.Over || u.Daily == nil || *u.Daily != 0.009 {
		t.Errorf("main in status: %+v", u)
	}
	// The owner's /groups says the same.
	in.Post("local:main", "Owner", "/groups")
	in.WaitFor("local:main", func(s string) bool {
		return strings.Contains(s, "- family (") && strings.Contains(s, "over budget")
	})
}

// An upstream 401 tells the main chat once what to do, whichever groups'
// runs meet it; no run is retried meanwhile; status and doctor show it
// until a request succeeds. A 429 shows in status with its retry time.
func TestRefusedCredentialToldOnce(t *testing.T) {
	mock := mockapi.New(t)
	in, _ := usageInstall(t, mock, "")
	mock.Fail(401, "authentication_error", "OAuth token has expired", "")
	for i, chat := range []string{"local:family", "local:main", "local:family"} {
		in.Post(chat, "Ann", "api 1")
		in.WaitNext(chat, func(s string) bool { return strings.Contains(s, "could not answer") })
		if n := len(mock.Log()); n != i+1 {
			t.Fatalf("after %d failed runs the API got %d requests: a run was retried", i+1, n)
		}
	}
	if n := countMessages(in, "local:main", "[CREDENTIAL]"); n != 1 {
		t.Errorf("the main chat got %d credential messages, want 1", n)
	}
	msg := in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "[CREDENTIAL]") })
	if text := strings.Join(e2e.InChat(msg, "local:main"), "\n"); !strings.Contains(text, "claude setup-token") || !strings.Contains(text, "401") {
		t.Errorf("the credential message does not say what to do:\n%s", text)
	}
	statusUntil(t, in, "the refused credential", func(r status.Report) bool {
		return len(r.ModelAPI) == 1 && r.ModelAPI[0].Kind == usage.HealthCredential && r.ModelAPI[0].Status == 401
	})
	if out, _, _ := e2e.Run(t, "", in.Env, "doctor", "--config", in.Config); !strings.Contains(out, "FIX  model api") || !strings.Contains(out, "claude setup-token") {
		t.Errorf("doctor does not show the refused credential:\n%s", out)
	}

	mock.Fail(429, "rate_limit_error", "slow down", "120")
	in.Post("local:family", "Ann", "api 1")
	statusUntil(t, in, "the rate limit", func(r status.Report) bool {
		for _, h := range r.ModelAPI {
			if h.Kind == usage.HealthRate && h.Status == 429 && !h.RetryAt.IsZero() {
				return true
			}
		}
		return false
	})
	if text := in.CLI("status"); !strings.Contains(text, "rate limited (HTTP 429)") || !strings.Contains(text, "retry in") {
		t.Errorf("status text lacks the rate limit:\n%s", text)
	}
	in.WaitNext("local:family", func(s string) bool { return strings.Contains(s, "could not answer") })

	mock.Fail(0, "", "", "")
	in.Post("local:main", "Owner", "api 1")
	in.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "api 1 ok") })
	statusUntil(t, in, "the problem gone after a success", func(r status.Report) bool { return len(r.ModelAPI) == 0 })
	if out, _, _ := e2e.Run(t, "", in.Env, "doctor", "--config", in.Config); !strings.Contains(out, "ok   model api") {
		t.Errorf("doctor still shows a problem after a success:\n%s", out)
	}
}
