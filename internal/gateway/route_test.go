package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstream is a Messages API on the loopback that logs what it was sent
// and answers as its mode says: "ok", "529", "hang" (no headers), "mute"
// (headers, then nothing).
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	mode string
	seen []seenRequest
	stop chan struct{}
}

type seenRequest struct {
	Model, APIKey, Auth, Beta string
	Body                      map[string]any
}

func newUpstream(t *testing.T, mode string) *upstream {
	u := &upstream{mode: mode, stop: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		model, _ := body["model"].(string)
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{model, r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.Header.Get("Anthropic-Beta"), body})
		mode := u.mode
		u.mu.Unlock()
		switch mode {
		case "529":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(529)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		case "hang":
			select {
			case <-u.stop:
			case <-r.Context().Done():
			}
			return
		case "mute":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			select {
			case <-u.stop:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":%q,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n", model)
		fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi from "+model+"\"}}\n\n")
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	t.Cleanup(func() { close(u.stop); u.Close() })
	return u
}

func (u *upstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen...)
}

// ask sends one streamed request as the SDK does and returns the status
// and body the agent got.
func ask(t *testing.T, client *http.Client, ph string, body string, beta string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://127.0.0.1:3128/v1/messages?beta=true", strings.NewReader(body))
	req.Header.Set("X-Api-Key", ph)
	req.Header.Set("Content-Type", "application/json")
	if beta != "" {
		req.Header.Set("Anthropic-Beta", beta)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const hello = `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`

// Each provider sees the model as it names it and its own credential,
// never the run's placeholder, the daemon's key or the other's.
func TestRelayRewritesModelAndCredentialPerProvider(t *testing.T) {
	p1, p2 := newUpstream(t, "ok"), newUpstream(t, "ok")
	for _, c := range []struct {
		target       Target
		up           *upstream
		model        string
		apiKey, auth string
	}{
		{Target{Provider: "p1", Model: "x", Upstream: "x-upstream", URL: p1.URL, Credential: "p1-key", Auth: AuthAPIKey}, p1, "x-upstream", "p1-key", ""},
		{Target{Provider: "p2", Model: "y", URL: p2.URL, Credential: "p2-token", Auth: AuthBearer}, p2, "y", "", "Bearer p2-token"},
	} {
		m := &meter{}
		run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Meter: m, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-daemon"},
			Route: Route{Targets: []Target{c.target}}})
		status, body := ask(t, client, run.Env()["ANTHROPIC_API_KEY"], hello, "")
		if status != 200 || !strings.Contains(body, "hi from "+c.model) {
			t.Fatalf("%s: %d %s", c.target.Provider, status, body)
		}
		seen := c.up.requests()
		if len(seen) != 1 || seen[0].Model != c.model || seen[0].APIKey != c.apiKey || seen[0].Auth != c.auth {
			t.Errorf("%s saw %+v", c.target.Provider, seen)
		}
		if len(m.served) != 1 || m.served[0].Key() != c.target.Key() || m.served[0].Fallback {
			t.Errorf("%s: the meter heard %+v", c.target.Provider, m.served)
		}
		if m.model != c.target.Model {
			t.Errorf("%s: usage recorded for model %q, want our name %q", c.target.Provider, m.model, c.target.Model)
		}
	}
	for _, r := range append(p1.requests(), p2.requests()...) {
		if strings.Contains(r.APIKey+r.Auth, "sk-daemon") || strings.Contains(r.APIKey+r.Auth, "placeholder") {
			t.Errorf("an upstream saw %q %q", r.APIKey, r.Auth)
		}
	}
}

// A failing chosen upstream (529, no headers, headers and then silence,
// a refused connection) hands the same request to the fallback, before
// any byte reached the agent; the next request skips the failed one.
func TestRelayFailsOver(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	for _, mode := range []string{"529", "hang", "mute", "refused"} {
		t.Run(mode, func(t *testing.T) {
			p1, p2 := newUpstream(t, mode), newUpstream(t, "ok")
			url1 := p1.URL
			if mode == "refused" {
				url1 = closedURL
			}
			m := &meter{}
			board := &Board{}
			route := Route{Timeout: 300 * time.Millisecond, Board: board, Targets: []Target{
				{Provider: "p1", Model: "x", URL: url1, Credential: "k1"},
				{Provider: "p2", Model: "y", URL: p2.URL, Credential: "k2"},
			}}
			run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Meter: m, Route: route,
				Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-daemon"}})
			ph := run.Env()["ANTHROPIC_API_KEY"]
			for i := 0; i < 2; i++ {
				status, body := ask(t, client, ph, hello, "")
				if status != 200 || !strings.Contains(body, "hi from y") {
					t.Fatalf("request %d: %d %s", i, status, body)
				}
			}
			if n := len(p1.requests()); mode != "refused" && n != 1 {
				t.Errorf("the failed upstream got %d requests; the second should have skipped it", n)
			}
			if seen := p2.requests(); len(seen) != 2 || seen[0].Model != "y" || seen[0].APIKey != "k2" {
				t.Errorf("the fallback saw %+v", seen)
			}
			// The meter hears every answer: a 529 too, then the fallback's.
			var ok []Served
			for i, s := range m.served {
				if m.statuses[i] == 200 {
					ok = append(ok, s)
				}
			}
			if len(ok) != 2 || !ok[0].Fallback || ok[0].Provider != "p2" {
				t.Errorf("the meter heard %+v (%v)", m.served, m.statuses)
			}
		})
	}
}

// When every upstream fails, the agent gets an error it does not retry,
// naming each failure, and the meter hears it.
func TestRelayAllUpstreamsFail(t *testing.T) {
	p1, p2 := newUpstream(t, "hang"), newUpstream(t, "529")
	m := &meter{}
	route := Route{Timeout: 300 * time.Millisecond, Targets: []Target{
		{Provider: "p1", Model: "x", URL: p1.URL, Credential: "k1"},
		{Provider: "p2", Model: "y", URL: p2.URL, Credential: "k2"},
	}}
	run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Meter: m, Route: route,
		Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-daemon"}})
	status, body := ask(t, client, run.Env()["ANTHROPIC_API_KEY"], hello, "")
	if status != 400 || !strings.Contains(body, "p1/x: no response headers within 300ms") || !strings.Contains(body, "p2/y: HTTP 529, Overloaded") {
		t.Fatalf("%d %s", status, body)
	}
	if len(p1.requests()) != 1 || len(p2.requests()) != 1 {
		t.Errorf("each upstream is tried once: %d, %d", len(p1.requests()), len(p2.requests()))
	}
	if len(m.failed) != 1 {
		t.Errorf("the meter heard %q", m.failed)
	}
}

// An answer that keeps streaming is never cut, however long it takes in
// all; only a silence as long as the timeout is.
func TestRelayNeverCutsAStreamingAnswer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 12; i++ {
			fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"%d \"}}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
		fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	route := Route{Timeout: 300 * time.Millisecond, Targets: []Target{{Provider: "p1", URL: up.URL, Credential: "k1"}}}
	run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Route: route, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk"}})
	status, body := ask(t, client, run.Env()["ANTHROPIC_API_KEY"], hello, "")
	if status != 200 || !strings.Contains(body, "message_stop") {
		t.Fatalf("%d %s", status, body)
	}
}

// A confined group's request never reaches the upstream with server
// tools, mcp_servers or the betas that enable them, unless its tools name
// them; what was taken out is audited.
func TestRelayKeepsServerToolsFromConfinedGroups(t *testing.T) {
	const req = `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}],
		"tools":[{"name":"notes","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search"},
		         {"type":"web_fetch_20250910","name":"web_fetch"},{"type":"code_execution_20250825","name":"code_execution"}],
		"tool_choice":{"type":"tool","name":"web_fetch"},
		"mcp_servers":[{"type":"url","url":"https://evil.example/mcp","name":"evil"}]}`
	const beta = "mcp-client-2025-04-04, web-fetch-2025-09-10,fine-grained-tool-streaming-2025-05-14"
	for _, c := range []struct {
		tools     []string
		wantTools []string
		wantMCP   bool
		wantBeta  string
	}{
		{nil, []string{"notes"}, false, "fine-grained-tool-streaming-2025-05-14"},
		{[]string{"Bash", "web_fetch", "mcp_servers"}, []string{"notes", "web_fetch"}, true, "mcp-client-2025-04-04,web-fetch-2025-09-10,fine-grained-tool-streaming-2025-05-14"},
	} {
		up := newUpstream(t, "ok")
		rep := &reports{}
		run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Reporter: rep, Tools: c.tools,
			AllowedDomains: []string{"evil.example"}, Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk"}})
		if status, body := ask(t, client, run.Env()["ANTHROPIC_API_KEY"], req, beta); status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		seen := up.requests()[0]
		var names []string
		for _, tl := range seen.Body["tools"].([]any) {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		_, mcp := seen.Body["mcp_servers"]
		if strings.Join(names, ",") != strings.Join(c.wantTools, ",") || mcp != c.wantMCP || seen.Beta != c.wantBeta {
			t.Errorf("tools %v: upstream saw tools %v, mcp_servers %v, beta %q", c.tools, names, mcp, seen.Beta)
		}
		if _, choice := seen.Body["tool_choice"]; choice != (c.tools != nil) {
			t.Errorf("tools %v: tool_choice kept: %v", c.tools, choice)
		}
		rep.mu.Lock()
		if len(rep.vs) != 1 || !strings.Contains(rep.vs[0].Detail, "server tool web_search_20250305") ||
			strings.Contains(rep.vs[0].Detail, "web_fetch") == (c.tools != nil) {
			t.Errorf("tools %v: audited %+v", c.tools, rep.vs)
		}
		rep.mu.Unlock()
	}
}

// The main group's relay is not confined: what it asks for goes as it is.
func TestLoopbackRelayKeepsServerTools(t *testing.T) {
	up := newUpstream(t, "ok")
	run, err := OpenLoopback(Config{Group: "main", Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk"}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	req, _ := http.NewRequest("POST", run.URL()+"/v1/messages", strings.NewReader(`{"model":"m","tools":[{"type":"web_search_20250305","name":"web_search"}]}`))
	req.Header.Set("X-Api-Key", run.Env()["ANTHROPIC_API_KEY"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen := up.requests(); len(seen) != 1 || len(seen[0].Body["tools"].([]any)) != 1 {
		t.Errorf("upstream saw %+v", seen)
	}
}
