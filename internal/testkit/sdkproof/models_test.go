package sdkproof

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// modelsInstall is the daemon with the real agent runner and SDK, its
// main group on p1 (at p1URL) with agent.model set, falling back to p2.
func modelsInstall(t *testing.T, w *world, p1URL, p2URL string) *e2e.Install {
	t.Helper()
	o := daemonOptions(t, w, p1URL, "3m", `"model": "claude-haiku-4-5", "provider": "p1", "apiTimeout": "5s",
		"fallback": [{"provider": "p2", "model": "claude-sonnet-4-5"}]`)
	o.Top = `"providers": {"p1": {"url": ` + e2e.Quote(p1URL) + `, "credential": "p1-key"},
		"p2": {"url": ` + e2e.Quote(p2URL) + `, "credential": "p2-key"}}`
	o.Wait = errorWait
	in := e2e.New(t, o)
	in.AddGroup("local:main", "main", "--main")
	return in
}

// messagesModels are the models of the Messages requests s received.
func messagesModels(s *mockapi.Server) []string {
	var out []string
	for _, r := range messagesRequests(s) {
		out = append(out, r.Model())
	}
	return out
}

// With agent.model set, the SDK is handed it (sdkOptions.model) and every
// request reaches the model API as that model, with the provider's key.
func TestSDKUsesTheConfiguredModel(t *testing.T) {
	w := newWorld(t)
	p1, p2 := mockapi.New(t), mockapi.New(t)
	dumpOnFailure(t, w, p1)
	in := modelsInstall(t, w, p1.URL, p2.URL)
	var shown struct {
		Model      string         `json:"model"`
		SDKOptions map[string]any `json:"sdkOptions"`
	}
	if err := json.Unmarshal([]byte(in.CLI("security", "show", "main", "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Model != "claude-haiku-4-5" || shown.SDKOptions["model"] != "claude-haiku-4-5" {
		t.Errorf("security show: model %q, sdkOptions.model %v", shown.Model, shown.SDKOptions["model"])
	}
	in.Start()
	in.Post("local:main", "Owner", "hello Andy")
	in.WaitFor("local:main", func(s string) bool { return s != "" && !strings.Contains(s, "could not answer") })
	models := messagesModels(p1)
	if len(models) == 0 || len(p2.Log()) != 0 {
		t.Fatalf("p1 got %q, p2 %d requests", models, len(p2.Log()))
	}
	for i, m := range models {
		if m != "claude-haiku-4-5" {
			t.Errorf("request %d reached the model API as %q", i, m)
		}
	}
	for _, r := range p1.Log() {
		if r.Header.Get("X-Api-Key") != "p1-key" {
			t.Errorf("p1 got the key %q", r.Header.Get("X-Api-Key"))
		}
	}
	// The SDK's own estimate, from its result, beside the relay's count.
	var totals []struct {
		Group        string   `json:"group"`
		Requests     int      `json:"requests"`
		AgentCostUSD *float64 `json:"agentCostUSD"`
	}
	out := in.CLI("usage", "--json")
	json.Unmarshal([]byte(out), &totals)
	if len(totals) != 1 || totals[0].Requests != len(models) || totals[0].AgentCostUSD == nil {
		t.Errorf("usage --json: %s", out)
	}
	t.Logf("usage: %s", out)
}

// The chosen upstream overloaded: the real SDK gets its answer from the
// fallback, as the fallback's model, and the chat hears it. With every
// upstream failing, the chat hears one plain sentence (the SDK does not
// retry the relay's error for minutes).
func TestSDKServedByTheFallback(t *testing.T) {
	w := newWorld(t)
	p1, p2 := mockapi.New(t), mockapi.New(t)
	dumpOnFailure(t, w, p2)
	p1.Fail(529, "overloaded_error", "Overloaded", "")
	in := modelsInstall(t, w, p1.URL, p2.URL)
	in.Start()
	in.Post("local:main", "Owner", "hello Andy")
	in.WaitFor("local:main", func(s string) bool { return s != "" && !strings.Contains(s, "could not answer") })
	models := messagesModels(p2)
	if len(models) == 0 {
		t.Fatal("the fallback got no request")
	}
	for i, m := range models {
		if m != "claude-sonnet-4-5" {
			t.Errorf("request %d reached the fallback as %q", i, m)
		}
	}

	p2.Fail(529, "overloaded_error", "Overloaded", "")
	in.Post("local:main", "Owner", "hello again")
	in.WaitFor("local:main", func(s string) bool {
		return strings.HasPrefix(s, "Andy could not answer: the model API is overloaded or over its rate limit.")
	})
}
