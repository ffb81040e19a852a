package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// heard waits for the relay to tell the run's owner it gave up.
func heard(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case why := <-ch:
		return why
	case <-time.After(30 * time.Second):
		t.Fatal("the relay never told the run's owner that no upstream answers")
		return ""
	}
}

// When every upstream of a run fails, the relay tells the run's owner
// once and answers every later request of the run at once with the same
// error, sending nothing upstream again; "trying the next" is logged only
// when there is a next.
func TestRelayGivesUpOnTheRun(t *testing.T) {
	p1, p2 := newUpstream(t, "hang"), newUpstream(t, "529")
	unanswered := make(chan string, 1)
	var log bytes.Buffer
	route := Route{Timeout: 300 * time.Millisecond, Targets: []Target{
		{Provider: "p1", Model: "x", URL: p1.URL, Credential: "k1"},
		{Provider: "p2", Model: "y", URL: p2.URL, Credential: "k2"},
	}}
	m := &meter{}
	run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Meter: m, Route: route, Unanswered: unanswered,
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-daemon"}, Log: zerolog.New(&log)})
	ph := run.Env()["ANTHROPIC_API_KEY"]
	status, first := ask(t, client, ph, hello, "")
	why := heard(t, unanswered)
	if status != 400 || !strings.Contains(first, why) || !strings.Contains(why, "p1/x: no response headers within 300ms") {
		t.Fatalf("%d %s (the owner heard %q)", status, first, why)
	}
	for i := 0; i < 3; i++ {
		if status, again := ask(t, client, ph, hello, ""); status != 400 || again != first {
			t.Errorf("a later request got %d %s, want the same error", status, again)
		}
	}
	if len(p1.requests()) != 1 || len(p2.requests()) != 1 {
		t.Errorf("the upstreams got %d and %d requests, want one each", len(p1.requests()), len(p2.requests()))
	}
	select {
	case again := <-unanswered:
		t.Errorf("the owner was told twice: %q", again)
	default:
	}
	if len(m.failed) != 1 {
		t.Errorf("the meter heard %q, want one failure", m.failed)
	}
	if n := strings.Count(log.String(), "trying the next"); n != 1 {
		t.Errorf("%d lines say \"trying the next\", want 1 (there is no next after p2):\n%s", n, log.String())
	}
}

// flaky answers its first n requests with 529 and a retry-after, then as
// the API does.
func flaky(t *testing.T, n int32) (*httptest.Server, *atomic.Int32) {
	var seen atomic.Int32
	ok := newUpstream(t, "ok")
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) <= n {
			w.Header().Set("Retry-After", "7")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(529)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		ok.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s, &seen
}

// With a single upstream, its 529 reaches the agent as it came, with its
// retry-after, so the SDK backs off; the next request is answered and the
// run goes on. One that answers nothing but failures for the timeout is
// given up on like one that does not answer.
func TestRelayPassesOnASingleUpstreamsTransientFailure(t *testing.T) {
	up, seen := flaky(t, 1)
	unanswered := make(chan string, 1)
	route := Route{Timeout: time.Hour, Targets: []Target{{Provider: "p1", URL: up.URL, Credential: "k1"}}}
	run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Route: route, Unanswered: unanswered,
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-daemon"}})
	ph := run.Env()["ANTHROPIC_API_KEY"]
	req, _ := http.NewRequest("POST", "http://127.0.0.1:3128/v1/messages", strings.NewReader(hello))
	req.Header.Set("X-Api-Key", ph)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || resp.Header.Get("Retry-After") != "7" || !strings.Contains(string(b), "overloaded_error") {
		t.Fatalf("the agent got %d (retry-after %q) %s, want the upstream's 529", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if status, body := ask(t, client, ph, hello, ""); status != 200 || !strings.Contains(body, "hi from") {
		t.Fatalf("after the 529: %d %s", status, body)
	}
	if seen.Load() != 2 {
		t.Errorf("the upstream got %d requests, want 2", seen.Load())
	}

	always, _ := flaky(t, 1<<30)
	route = Route{Timeout: 300 * time.Millisecond, Targets: []Target{{Provider: "p1", URL: always.URL, Credential: "k1"}}}
	run, client = open(t, Config{Group: "family", Self: "127.0.0.1:3128", Route: route, Unanswered: unanswered,
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-daemon"}})
	if status, _ := ask(t, client, run.Env()["ANTHROPIC_API_KEY"], hello, ""); status != 529 {
		t.Fatalf("the first 529 reached the agent as %d", status)
	}
	if why := heard(t, unanswered); !strings.Contains(why, "p1: HTTP 529, Overloaded") {
		t.Errorf("the owner heard %q", why)
	}
	if status, body := ask(t, client, run.Env()["ANTHROPIC_API_KEY"], hello, ""); status != 400 || !strings.Contains(body, "no model upstream answered") {
		t.Errorf("after giving up: %d %s", status, body)
	}
}

// The failure board keeps each provider and model apart: a model that
// failed moves its own requests to the fallback, not another model's of
// the same provider; and an upstream refusing a request as malformed
// (400) is not marked down.
func TestFailureMemoryIsPerProviderAndModel(t *testing.T) {
	p1 := newUpstream(t, "529")
	p2 := newUpstream(t, "ok")
	board := &Board{}
	route := Route{Timeout: 5 * time.Second, Board: board, Targets: []Target{
		{Provider: "p1", URL: p1.URL, Credential: "k1"}, // the model as the request asks
		{Provider: "p2", URL: p2.URL, Credential: "k2"},
	}}
	run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Route: route,
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-daemon"}})
	ph := run.Env()["ANTHROPIC_API_KEY"]
	opus := strings.Replace(hello, "claude-sonnet-4-5", "claude-opus-4-1", 1)
	if status, _ := ask(t, client, ph, opus, ""); status != 200 {
		t.Fatalf("opus: %d", status)
	}
	p1.mu.Lock()
	p1.mode = "ok"
	p1.mu.Unlock()
	if status, body := ask(t, client, ph, hello, ""); status != 200 || !strings.Contains(body, "hi from claude-sonnet-4-5") {
		t.Fatalf("sonnet: %d %s", status, body)
	}
	if seen := p1.requests(); len(seen) != 2 || seen[1].Model != "claude-sonnet-4-5" {
		t.Errorf("sonnet did not go to p1 first after opus failed there: %+v", seen)
	}
	if got := route.order(time.Now(), "claude-opus-4-1"); got[0].Provider != "p2" {
		t.Errorf("opus is tried on %s first, want p2 (p1 failed it lately)", got[0].Provider)
	}

	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}`)
	}))
	defer bad.Close()
	board = &Board{}
	route = Route{Timeout: 5 * time.Second, Board: board, Targets: []Target{{Provider: "p3", Model: "m", URL: bad.URL, Credential: "k"}}}
	run, client = open(t, Config{Group: "family", Self: "127.0.0.1:3128", Route: route,
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-daemon"}})
	if status, _ := ask(t, client, run.Env()["ANTHROPIC_API_KEY"], hello, ""); status != 400 {
		t.Fatalf("the upstream's 400 reached the agent as %d", status)
	}
	if len(board.failed) != 0 {
		t.Errorf("a malformed request marked the upstream down: %v", board.failed)
	}
}

// A request that is not streamed has the timeout for its whole answer: an
// upstream that sends its headers and then dribbles the body past it is a
// failure the fallback serves, nothing of it having reached the agent.
// (A streamed answer that keeps coming is never cut:
// TestRelayNeverCutsAStreamingAnswer.)
func TestRelayBoundsAWholeAnswer(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		for i := 0; i < 100; i++ {
			if _, err := fmt.Fprint(w, " "); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		io.WriteString(w, `{"type":"message","content":[{"type":"text","text":"slow"}]}`)
	}))
	defer slow.Close()
	fast := newUpstream(t, "ok")
	route := Route{Timeout: 300 * time.Millisecond, Targets: []Target{
		{Provider: "p1", Model: "x", URL: slow.URL, Credential: "k1"},
		{Provider: "p2", Model: "y", URL: fast.URL, Credential: "k2"},
	}}
	run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Route: route,
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-daemon"}})
	whole := strings.Replace(hello, `"stream":true`, `"stream":false`, 1)
	status, body := ask(t, client, run.Env()["ANTHROPIC_API_KEY"], whole, "")
	if status != 200 || strings.Contains(body, "slow") || !strings.Contains(body, "hi from y") {
		t.Fatalf("%d %q, want the fallback's whole answer and nothing of the slow one", status, body)
	}
}

// A run whose providers all take their own credential or none (a local
// model server) needs no key of the daemon's: its agent gets a placeholder
// standing for none, and the upstream gets no credential at all.
func TestKeylessProviderNeedsNoDaemonKey(t *testing.T) {
	up := newUpstream(t, "ok")
	route := Route{Targets: []Target{{Provider: "local", Model: "m", URL: up.URL}}}
	run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Route: route})
	ph := run.Env()[KeylessVar]
	if !strings.HasPrefix(ph, "nanoclaw-placeholder-") {
		t.Fatalf("the agent was given %q for %s", ph, KeylessVar)
	}
	if status, body := ask(t, client, ph, hello, ""); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if seen := up.requests(); len(seen) != 1 || seen[0].APIKey != "" || seen[0].Auth != "" {
		t.Errorf("the keyless upstream saw %+v", seen)
	}
	if status, _ := ask(t, client, "nanoclaw-placeholder-guessed", hello, ""); status != 401 {
		t.Errorf("a credential not of this run got %d, want 401", status)
	}
	builtin, _ := open(t, Config{Group: "family", Self: "127.0.0.1:3128"})
	if len(builtin.Env()) != 0 {
		t.Errorf("a run on the built-in provider without a key got %v", builtin.Env())
	}
}
