package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// modelsInstall: two providers on the loopback (p1 with an API key, p2
// with a bearer token), every group on p1's model x unless its override
// says otherwise, p2's y as the fallback, and a 2 s apiTimeout. The main
// group, family (confined) and work (confined, on p2's y) are registered.
func modelsInstall(t *testing.T, p1, p2 *mockapi.Server) (*e2e.Install, string) {
	t.Helper()
	realKey := "sk-ant-real-" + randHex(t)
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "timeout": "60s", "idleTimeout": "60s",
			"env": ["ANTHROPIC_API_KEY", "TESTAGENT_LOG"], "warm": 0,
			"provider": "p1", "model": "x", "apiTimeout": "2s", "fallback": [{"provider": "p2", "model": "y"}]`,
		Top: `"providers": {
			"p1": {"url": ` + e2e.Quote(p1.URL) + `, "credential": "p1-key", "models": {"x": "x-upstream", "z": "z-upstream"}},
			"p2": {"url": ` + e2e.Quote(p2.URL) + `, "credential": "p2-token", "auth": "bearer", "models": {"y": "y-upstream"}}}`,
		Env: []string{"ANTHROPIC_API_KEY=" + realKey, "TESTAGENT_LOG=" + filepath.Join(t.TempDir(), "agent.log")},
	})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.AddGroup("local:work", "work", "--no-trigger")
	override := filepath.Join(t.TempDir(), "work.json")
	os.WriteFile(override, []byte(`{"provider": "p2", "model": "y"}`), 0o600)
	in.CLI("groups", "set-security", "work", "--file", override)
	in.Start()
	return in, realKey
}

func apiOK(s string) bool { return strings.HasPrefix(s, "api 1 ok") }

// nth is a WaitFor check that holds at the n-th message ok accepts.
func nth(n int, ok func(string) bool) func(string) bool {
	seen := 0
	return func(s string) bool {
		if ok(s) {
			seen++
		}
		return seen >= n
	}
}

// Each group's requests reach its own provider with the model as that
// provider names it and that provider's credential only; a 529 from the
// chosen upstream is served by the fallback and answered in the chat;
// /model from the main chat changes the group's next request; and usage
// --by model has one row per group, provider and model as configured.
func TestModelsPerGroupProviderAndFailover(t *testing.T) {
	p1, p2 := mockapi.New(t), mockapi.New(t)
	in, realKey := modelsInstall(t, p1, p2)

	in.Post("local:family", "Ann", "api 1")
	in.WaitFor("local:family", apiOK)
	in.Post("local:work", "Bob", "api 1")
	in.WaitFor("local:work", apiOK)
	check := func(who string, s *mockapi.Server, model, key, auth string) {
		t.Helper()
		log := s.Log()
		if len(log) == 0 {
			t.Fatalf("%s got no request", who)
		}
		r := log[len(log)-1]
		if r.Model() != model || r.Header.Get("X-Api-Key") != key || r.Header.Get("Authorization") != auth {
			t.Errorf("%s saw model %q, X-Api-Key %q, Authorization %q; want %q, %q, %q", who, r.Model(), r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), model, key, auth)
		}
	}
	check("p1", p1, "x-upstream", "p1-key", "")
	check("p2", p2, "y-upstream", "", "Bearer p2-token")
	for _, s := range []*mockapi.Server{p1, p2} {
		if s.Contains(realKey) || s.Contains("placeholder") {
			t.Errorf("an upstream saw the daemon's key or a placeholder")
		}
	}
	if p1.Contains("p2-token") || p2.Contains("p1-key") {
		t.Errorf("an upstream saw the other's credential")
	}
	for name, s := range map[string]*mockapi.Server{"p1": p1, "p2": p2} {
		for _, r := range s.Log() {
			creds := r.Header.Get("X-Api-Key") + " " + r.Header.Get("Authorization")
			if strings.Contains(creds, realKey) || strings.Contains(creds, "placeholder") || strings.Contains(creds, map[string]string{"p1": "p2-token", "p2": "p1-key"}[name]) {
				t.Errorf("%s saw the credential %q", name, creds)
			}
		}
	}

	p1.Fail(529, "overloaded_error", "Overloaded", "")
	n2 := len(p2.Log())
	in.Post("local:family", "Ann", "api 1")
	in.WaitFor("local:family", nth(2, apiOK))
	if len(p2.Log()) != n2+1 {
		t.Errorf("the fallback got %d requests, want 1", len(p2.Log())-n2)
	}
	check("the fallback p2", p2, "y-upstream", "", "Bearer p2-token")
	rep := statusUntil(t, in, "family on its fallback", func(r status.Report) bool { return group(r, "family").Fallback != nil })
	if f := group(rep, "family"); f.Fallback.Upstream != "p2/y" || f.Model != "x" || f.Provider != "p1" {
		t.Errorf("family in status: %+v", f)
	}
	if text := in.CLI("status"); !strings.Contains(text, "fallback p2/y for") {
		t.Errorf("status text does not say family is served by the fallback:\n%s", text)
	}

	p1.Fail(0, "", "", "")
	in.Post("local:main", "Owner", "/model family nope")
	in.WaitFor("local:main", func(s string) bool {
		return strings.Contains(s, `"nope" is not a known model; known:`) && strings.Contains(s, "z")
	})
	in.Post("local:main", "Owner", "/model family z")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "family now uses z (was x (agent.model))") })
	in.Post("local:main", "Owner", "/model family")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "family uses z.") })
	in.Post("local:family", "Ann", "api 1")
	in.WaitFor("local:family", nth(3, apiOK))
	check("p1 after /model", p1, "z-upstream", "p1-key", "")
	statusUntil(t, in, "family back on its chosen upstream", func(r status.Report) bool { return group(r, "family").Fallback == nil })

	out := in.CLI("usage", "--json", "--by", "model")
	var rows []usage.ModelTotal
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("usage --json --by model: %v\n%s", err, out)
	}
	got := map[string]int64{}
	for _, r := range rows {
		got[r.Group+" "+r.Provider+" "+r.Model] += r.Requests
	}
	for _, want := range []string{"family p1 x", "family p2 y", "family p1 z", "work p2 y"} {
		if got[want] != 1 {
			t.Errorf("usage --by model: %q has %d requests, want 1: %s", want, got[want], out)
		}
	}
	if strings.Contains(out, "upstream") {
		t.Errorf("usage --by model names a model as the upstream does: %s", out)
	}

	_, errs, code := e2e.Run(t, "", in.Env, "groups", "set-model", "family", "gpt-9", "--config", in.Config)
	if code == 0 || !strings.Contains(errs, `"gpt-9" is not a known model; known: `) || !strings.Contains(errs, "nothing changed") {
		t.Errorf("set-model to an unknown model: exit %d, %s", code, errs)
	}
	if got := in.CLI("groups", "set-model", "family", "--clear"); !strings.Contains(got, "family now uses x (agent.model) (was z)") {
		t.Errorf("set-model --clear: %s", got)
	}
	var shown struct{ Model, Provider string }
	json.Unmarshal([]byte(in.CLI("security", "show", "work", "--json")), &shown)
	if shown.Model != "y" || shown.Provider != "p2" {
		t.Errorf("security show work: %+v", shown)
	}
}

// An upstream that accepts and never answers is a failure after
// apiTimeout: the fallback serves the request. When every upstream hangs,
// the chat hears one plain sentence (not minutes of retries), status says
// the model API is not answering until a request succeeds, and a confined
// group's own attempt to reach the loopback provider is refused and
// audited while its relay reaches it.
func TestModelsHangingUpstreams(t *testing.T) {
	p1, p2 := mockapi.New(t), mockapi.New(t)
	in, _ := modelsInstall(t, p1, p2)

	p1.Hang(true)
	in.Post("local:family", "Ann", "api 1")
	in.WaitFor("local:family", apiOK)
	if r := p2.Log(); len(r) != 1 || r[0].Model() != "y-upstream" {
		t.Fatalf("the fallback was not asked: %d requests", len(r))
	}

	p2.Hang(true)
	in.Post("local:family", "Ann", "api 1")
	in.WaitFor("local:family", func(s string) bool {
		return strings.Contains(s, "could not answer: the model API could not be reached")
	})
	rep := statusUntil(t, in, "the model API not answering", func(r status.Report) bool {
		for _, h := range r.ModelAPI {
			if h.Kind == usage.HealthDown {
				return true
			}
		}
		return false
	})
	if text := in.CLI("status"); !strings.Contains(text, "not answering: nanoclaw relay: no model upstream answered") {
		t.Errorf("status text lacks the upstream not answering (%+v):\n%s", rep.ModelAPI, text)
	}

	p1.Hang(false)
	p2.Hang(false)
	in.Post("local:family", "Ann", "api 1")
	in.WaitFor("local:family", nth(2, apiOK))
	statusUntil(t, in, "the model API answering again", func(r status.Report) bool { return len(r.ModelAPI) == 0 })

	// The relay reached p1 on the loopback; the group itself may not.
	before := len(p1.Log())
	in.Post("local:family", "Ann", "curl "+p1.URL+"/v1/messages")
	in.WaitFor("local:family", func(s string) bool { return strings.HasPrefix(s, "curl "+p1.URL+"/v1/messages: refused") })
	in.WaitFor("local:main", func(s string) bool {
		return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, "127.0.0.1")
	})
	if len(p1.Log()) != before {
		t.Errorf("the group's own request reached the loopback provider")
	}
}

// A confined group's request carrying server tools, mcp_servers and the
// betas that enable them reaches the model API without them (its own
// custom tool kept), and what was taken out is alerted to the main chat.
func TestRelayKeepsServerToolsFromAConfinedGroup(t *testing.T) {
	mock := mockapi.New(t)
	in, _ := usageInstall(t, mock, "")
	in.Post("local:family", "Ann", "api-servertools")
	in.WaitFor("local:family", apiOK)
	in.WaitFor("local:main", func(s string) bool {
		return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, "web_search_20250305")
	})
	log := mock.Log()
	if len(log) != 1 {
		t.Fatalf("the model API got %d requests", len(log))
	}
	body, beta := string(log[0].Body), log[0].Header.Get("Anthropic-Beta")
	for _, gone := range []string{"web_search", "web_fetch", "code_execution", "mcp_servers", "mcp.example.net"} {
		if strings.Contains(body, gone) {
			t.Errorf("the request reached the model API with %q: %s", gone, body)
		}
	}
	if beta != "" || !strings.Contains(body, `"notes"`) {
		t.Errorf("beta %q, body %s", beta, body)
	}
}
