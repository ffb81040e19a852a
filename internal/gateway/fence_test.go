package gateway

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// withContent is a request whose first user message holds block.
func withContent(block string) string {
	return `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"look"},` + block + `]}]}`
}

// A confined group's request that would have the API fetch a URL goes
// upstream only when the group may reach the URL's host (its
// allowedDomains and deniedDomains, wildcards and ports as the proxy reads
// them); otherwise it is refused with one error naming the host and how to
// allow it, never retried, and each host is a network violation the
// owner's /allow code can open.
func TestRelayFencesWhatTheAPIWouldFetch(t *testing.T) {
	allowed := []string{"*.example.org", "files.example.net:8443", "cdn.example.com"}
	denied := []string{"secret.example.org"}
	image := func(u string) string {
		return `{"type":"image","source":{"type":"url","url":"` + u + `"}}`
	}
	for _, c := range []struct {
		name, body string
		tools      []string
		refused    []string // hosts refused, "" = passes
	}{
		{"allowed image", withContent(image("https://img.example.org/cat.png")), nil, nil},
		{"image elsewhere", withContent(image("https://evil.example/x.png?d=CANARY")), nil, []string{"evil.example"}},
		{"denied host", withContent(image("https://secret.example.org/x.png")), nil, []string{"secret.example.org"}},
		{"the port written", withContent(image("https://files.example.net:8443/a.pdf")), nil, nil},
		{"another port", withContent(image("https://cdn.example.com:8080/a.png")), nil, []string{"cdn.example.com:8080"}},
		{"the rule's name, not its port", withContent(image("https://files.example.net/a.pdf")), nil, []string{"files.example.net"}},
		{"an address", withContent(image("http://203.0.113.9/a.png")), nil, []string{"203.0.113.9"}},
		{"not http", withContent(image("ftp://img.example.org/a.png")), nil, []string{"a URL that is not http(s)"}},
		{"document in a tool result", `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[
			{"type":"document","source":{"type":"url","url":"https://evil.example/r.pdf"}}]}]}]}`, nil, []string{"evil.example"}},
		{"any block type, in the system prompt", `{"model":"m","system":[{"type":"text","text":"hi"},
			{"type":"future_block","source":{"url":"https://other.example/y"}}],"messages":[]}`, nil, []string{"other.example"}},
		{"several hosts, once each", withContent(image("https://a.example/1") + "," + image("https://a.example/2") + "," + image("https://b.example/3")),
			nil, []string{"a.example", "b.example"}},
		{"mcp server elsewhere", `{"model":"m","messages":[],"mcp_servers":[{"type":"url","url":"https://mcp.evil.example/sse","name":"far"}]}`,
			[]string{"mcp_servers"}, []string{"mcp.evil.example"}},
		{"mcp server allowed", `{"model":"m","messages":[],"mcp_servers":[{"type":"url","url":"https://mcp.example.org/sse","name":"near"}]}`,
			[]string{"mcp_servers"}, nil},
		{"mcp server behind a key in another case", `{"model":"m","messages":[],"mcp_servers":[{"type":"url","url":"https://mcp.evil.example/sse","URL":"https://mcp.example.org/sse"}]}`,
			[]string{"mcp_servers"}, []string{"mcp.evil.example"}},
		{"a key written twice goes on as checked", withContent(`{"type":"image","source":{"type":"url","url":"https://evil.example/x.png","url":"https://img.example.org/x.png"}}`),
			nil, nil},
		{"mcp servers not allowed at all: removed, not refused", `{"model":"m","messages":[],"mcp_servers":[{"type":"url","url":"https://mcp.evil.example/sse"}]}`,
			nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := mockapi.New(t) // keeps each request's bytes as they came
			rep := &reports{}
			run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Reporter: rep, Tools: c.tools,
				AllowedDomains: allowed, DeniedDomains: denied, Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk"}})
			status, body := ask(t, client, run.Env()["ANTHROPIC_API_KEY"], c.body, "")
			if c.refused == nil {
				if status != 200 || len(up.Log()) != 1 {
					t.Fatalf("refused: %d %s", status, body)
				}
				if up.Contains("evil.example") {
					t.Errorf("the upstream read a host the group may not reach: %s", up.Log()[0].Body)
				}
				return
			}
			if status != 400 || len(up.Log()) != 0 {
				t.Fatalf("%d %s; the upstream got %d requests", status, body, len(up.Log()))
			}
			var e struct {
				Error struct{ Type, Message string }
			}
			json.Unmarshal([]byte(body), &e)
			for _, want := range append([]string{"/allow", "network.allowedDomains"}, c.refused...) {
				if !strings.Contains(e.Error.Message, want) {
					t.Errorf("the agent's error does not name %q: %s", want, e.Error.Message)
				}
			}
			if strings.Contains(body, "CANARY") {
				t.Errorf("the error repeats the URL's query: %s", body)
			}
			rep.mu.Lock()
			defer rep.mu.Unlock()
			var targets []string
			for _, v := range rep.vs {
				targets = append(targets, v.Target)
				if v.Kind != security.KindNetwork || v.Action != "blocked" || v.Rule == "" || !strings.Contains(v.Detail, v.Target) {
					t.Errorf("violation %+v", v)
				}
			}
			slices.Sort(targets)
			if !slices.Equal(targets, c.refused) {
				t.Errorf("audited %q, want %q", targets, c.refused)
			}
		})
	}
}

// An allowed web_search or web_fetch reaches the API held to the group's
// domains: its allowed_domains are the group's (an entry of the agent's
// own beyond them is reported), or with "*" its blocked_domains gain the
// denied ones; with no domain to hold it to, it does not go at all.
func TestRelayHoldsWebToolsToTheGroupsDomains(t *testing.T) {
	tool := func(extra string) string {
		return `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"name":"notes","input_schema":{"type":"object"}},
			{"type":"web_fetch_20250910","name":"web_fetch"` + extra + `}]}`
	}
	for _, c := range []struct {
		name            string
		allowed, denied []string
		body            string
		want            string // the web_fetch tool upstream, as JSON ("" = removed)
		audited         []string
	}{
		{"the group's names", []string{"*.example.org", "docs.example.com", "example.net:8443", "10.0.0.5", "docs.example.com:443"}, nil, tool(""),
			`{"allowed_domains":["example.org","docs.example.com"],"name":"web_fetch","type":"web_fetch_20250910"}`, nil},
		{"the agent's own list replaced", []string{"docs.example.com"}, nil, tool(`,"allowed_domains":["docs.example.com","evil.example/x"],"blocked_domains":["a.b"]`),
			`{"allowed_domains":["docs.example.com"],"name":"web_fetch","type":"web_fetch_20250910"}`, []string{"evil.example"}},
		{"any name, some denied", []string{"*"}, []string{"*.evil.example"}, tool(`,"blocked_domains":["ads.example"]`),
			`{"blocked_domains":["ads.example","evil.example"],"name":"web_fetch","type":"web_fetch_20250910"}`, nil},
		{"any name, the agent's list", []string{"*"}, []string{"evil.example"}, tool(`,"allowed_domains":["docs.example.com","evil.example"]`),
			`{"allowed_domains":["docs.example.com"],"name":"web_fetch","type":"web_fetch_20250910"}`, []string{"evil.example"}},
		{"no domain", []string{"10.0.0.5"}, nil, tool(""), "", []string{"POST /v1/messages"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := newUpstream(t, "ok")
			rep := &reports{}
			run, client := open(t, Config{Group: "family", Self: "127.0.0.1:3128", Reporter: rep, Tools: []string{"web_fetch"},
				AllowedDomains: c.allowed, DeniedDomains: c.denied, Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk"}})
			if status, body := ask(t, client, run.Env()["ANTHROPIC_API_KEY"], c.body, ""); status != 200 {
				t.Fatalf("%d %s", status, body)
			}
			tools := up.requests()[0].Body["tools"].([]any)
			got := ""
			if len(tools) == 2 {
				b, _ := json.Marshal(tools[1])
				got = string(b)
			}
			if got != c.want || fmt.Sprint(tools[0].(map[string]any)["name"]) != "notes" {
				t.Errorf("upstream saw the tools %v\nwant web_fetch as %s", tools, c.want)
			}
			rep.mu.Lock()
			defer rep.mu.Unlock()
			var targets []string
			for _, v := range rep.vs {
				targets = append(targets, v.Target)
			}
			if !slices.Equal(targets, c.audited) {
				t.Errorf("audited %q, want %q", targets, c.audited)
			}
		})
	}
}
