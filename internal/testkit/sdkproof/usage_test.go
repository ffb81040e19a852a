package sdkproof

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// What every answer of the mock reports, and its price: (1000×2 + 500×10 +
// 200×2.5 + 3000×0.2) / 1e6 = $0.0081 an answer.
var (
	answerUsage = mockapi.Usage{Input: 1000, Output: 500, CacheWrite: 200, CacheRead: 3000}
	answerCost  = 0.0081
)

// The real SDK against an API that compresses its answers although the
// relay asks for them as they are (gzip, then br): the chat is answered,
// and `usage --json`, /metrics and the budget all go by exactly the tokens
// the answers reported. A budget set below one answer refuses the next
// message before it reaches the API, and the owner is told.
func TestSDKUsageFromCompressedAnswers(t *testing.T) {
	w := newWorld(t)
	mock := mockapi.New(t)
	dumpOnFailure(t, w, mock)
	mock.SetUsage(answerUsage)
	o := daemonOptions(t, w, mock.URL, "3m", `"model": "claude-haiku-4-5"`)
	o.Top = `"console": {"listen": "127.0.0.1:0", "metricsToken": "m-token"},
		"usage": {"prices": {"claude-haiku-4-5": {"input": 2, "output": 10, "cacheWrite": 2.5, "cacheRead": 0.2}}}`
	o.Wait = errorWait
	in := e2e.New(t, o)
	in.AddGroup("local:main", "main", "--main")
	in.Start()

	for _, enc := range []string{"gzip", "br"} {
		mock.SetEncoding(enc)
		in.Post("local:main", "Owner", "hello Andy, "+enc)
		if got := in.WaitNext("local:main", func(s string) bool { return s != "" }); strings.Contains(got.Text, "could not answer") {
			t.Fatalf("the chat got %q", got.Text)
		}
	}
	answered := messagesRequests(mock)
	var encodings []string
	for i, r := range answered {
		encodings = append(encodings, r.Encoding)
		if r.Header.Get("Accept-Encoding") != "identity" || r.Encoding == "" {
			t.Errorf("request %d: asked for %q, answered in %q", i, r.Header.Get("Accept-Encoding"), r.Encoding)
		}
	}
	if !slices.Contains(encodings, "gzip") || !slices.Contains(encodings, "br") {
		t.Fatalf("the mock answered in %q: gzip and br are not both tested", encodings)
	}

	n := int64(len(answered))
	t.Logf("the SDK made %d Messages requests, answered in %q", n, encodings)
	want := map[string]int64{"inputTokens": n * 1000, "outputTokens": n * 500, "cacheWriteTokens": n * 200, "cacheReadTokens": n * 3000}
	got := mainUsage(t, in, n)
	for k, v := range want {
		if got[k] != float64(v) {
			t.Errorf("usage --json %s = %v, want %d (%d answers)", k, got[k], v, n)
		}
	}
	if math.Abs(got["costUSD"]-float64(n)*answerCost) > 1e-9 {
		t.Errorf("usage --json costUSD = %v, want %v", got["costUSD"], float64(n)*answerCost)
	}
	tokens := metricTokens(t, in)
	for typ, v := range map[string]int64{"input": n * 1000, "output": n * 500, "cache_write": n * 200, "cache_read": n * 3000} {
		if tokens[typ] != float64(v) {
			t.Errorf("/metrics nanoclawd_model_tokens_total{group=main,type=%s} = %v, want %d", typ, tokens[typ], v)
		}
	}

	// A budget below one answer: the next message is refused before any
	// request reaches the API, and the owner hears why.
	override := filepath.Join(t.TempDir(), "main.json")
	if err := os.WriteFile(override, []byte(`{"budget": {"daily": 0.004}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	in.CLI("groups", "set-security", "main", "--file", override)
	in.Post("local:main", "Owner", "and now?")
	refused := in.WaitNext("local:main", func(s string) bool { return strings.Contains(s, "could not answer") })
	if !strings.Contains(refused.Text, "daily model budget of group main is spent") {
		t.Errorf("the chat was not told the budget is spent: %q", refused.Text)
	}
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "[BUDGET] Group main") })
	if after := int64(len(messagesRequests(mock))); after != n {
		t.Errorf("the API got %d requests past the budget", after-n)
	}
}

// messagesRequests are the Messages requests s answered (not token counts).
func messagesRequests(s *mockapi.Server) []mockapi.Request {
	var out []mockapi.Request
	for _, r := range s.Log() {
		if r.Path == "/v1/messages" {
			out = append(out, r)
		}
	}
	return out
}

// mainUsage is the main group's object of `usage --json` once it counts n
// requests: the last answer is recorded before the agent reads its end,
// but an SDK's side request may still be under way when the chat is.
func mainUsage(t *testing.T, in *e2e.Install, n int64) map[string]float64 {
	t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		last = in.CLI("usage", "--json")
		var list []map[string]any
		if err := json.Unmarshal([]byte(last), &list); err != nil {
			t.Fatalf("usage --json: %v\n%s", err, last)
		}
		for _, g := range list {
			if g["group"] != "main" || g["requests"] != float64(n) {
				continue
			}
			out := map[string]float64{}
			for k, v := range g {
				if f, ok := v.(float64); ok {
					out[k] = f
				}
			}
			return out
		}
	}
	t.Fatalf("usage --json never counted %d requests of main:\n%s", n, last)
	return nil
}

// metricTokens sums /metrics' nanoclawd_model_tokens_total of the main
// group by type.
func metricTokens(t *testing.T, in *e2e.Install) map[string]float64 {
	t.Helper()
	var rep status.Report
	if err := json.Unmarshal([]byte(in.CLI("status", "--json")), &rep); err != nil || rep.Console == nil || rep.Console.URL == "" {
		t.Fatalf("status --json names no console: %v", err)
	}
	families := e2e.Metrics(t, rep.Console.URL, "m-token")
	out := map[string]float64{}
	if f := families["nanoclawd_model_tokens_total"]; f != nil {
		for _, m := range f.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["group"] == "main" {
				out[labels["type"]] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}
