package failure

import (
	"slices"
	"strings"
	"testing"
)

// What the Claude CLI says for each failure (measured against a mock API
// and a closed port) is told apart, and only what a retry cannot fix ends
// the run.
func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		err   string
		kind  string
		final bool
	}{
		{"Invalid API key · Fix external API key", "credential", true},
		{"Failed to authenticate. API Error: 403 boom", "credential", true},
		{"OAuth token has expired. Please obtain a new token or refresh your existing token.", "credential", true},
		{"API Error: 400 model: claude-nope is not a valid model", "request", true},
		{`API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"nanoclaw: the daily model budget of group Family-2 is spent ($0.01 of $0.01)"}}`, "budget", true},
		{"API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)", "unreachable", false},
		{"API Error: 502 boom. This is a server-side issue, usually temporary — try again in a moment.", "unreachable", false},
		{"API Error: Request timed out.", "unreachable", false},
		{`API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "overloaded", false},
		{"API Error: 429 rate_limit_error", "overloaded", false},
		{`API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"nanoclaw relay: no model upstream answered (p1/x: no response headers within 60s; p2/y: HTTP 529, Overloaded)"}}`, "unreachable", true},
		{`API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"nanoclaw relay: no model upstream answered (anthropic: HTTP 429, slow down; local/qwen: HTTP 529)"}}`, "overloaded", true},
		{`API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"nanoclaw sandbox: this request was not sent: it would have the model API fetch from where group family may not reach: image source at evil.example (not in network.allowedDomains)."}}`, "fenced", true},
		{"error_max_turns", "other", false},
		{"", "other", false},
	} {
		f := Classify(tt.err)
		if f.Kind != tt.kind || f.Final != tt.final {
			t.Errorf("Classify(%q) = %s final=%v, want %s final=%v", tt.err, f.Kind, f.Final, tt.kind, tt.final)
		}
	}
}

func TestRedact(t *testing.T) {
	got := Redact("Invalid API key sk-ant-api03-abc_DEF-123 · Authorization: Bearer sk-xyz")
	if strings.Contains(got, "abc_DEF") || strings.Contains(got, "sk-xyz") || !strings.HasPrefix(got, "Invalid API key [redacted]") {
		t.Errorf("Redact = %q", got)
	}
}

// The Claude CLI's advice to its own users never reaches a chat.
func TestWithoutSDKHints(t *testing.T) {
	for in, want := range map[string]string{
		"Invalid API key · Please run /login":               "Invalid API key",
		"Not logged in · Please run /login":                 "Not logged in",
		"OAuth token has expired. Please run /login.":       "OAuth token has expired",
		"Failed to authenticate. API Error: 401 run /login": "Failed to authenticate. API Error: 401",
		"API Error: 500 internal":                           "API Error: 500 internal",
	} {
		if got := WithoutSDKHints(in); got != want {
			t.Errorf("WithoutSDKHints(%q) = %q, want %q", in, got, want)
		}
	}
}

// A missing credential's fix names only the step still to do, as
// agent.env and the environment stand.
func TestMissingCredential(t *testing.T) {
	env := func(set ...string) func(string) string {
		return func(k string) string {
			if slices.Contains(set, k) {
				return "x"
			}
			return ""
		}
	}
	for _, tt := range []struct {
		agentEnv []string
		getenv   func(string) string
		want     string
		not      string
	}{
		{[]string{"ANTHROPIC_API_KEY"}, env(), "agent.env lists ANTHROPIC_API_KEY, but it is set nowhere: put ANTHROPIC_API_KEY=… in nanoclawd.env", "add"},
		{[]string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}, env(), "agent.env lists ANTHROPIC_API_KEY and CLAUDE_CODE_OAUTH_TOKEN, but none is set", "add"},
		{nil, env("CLAUDE_CODE_OAUTH_TOKEN"), `CLAUDE_CODE_OAUTH_TOKEN is set, but agents get only what agent.env lists: add "CLAUDE_CODE_OAUTH_TOKEN" to agent.env`, "nanoclawd.env"},
		{[]string{"GH_TOKEN"}, env(), "put ANTHROPIC_API_KEY=… (or CLAUDE_CODE_OAUTH_TOKEN=… from 'claude setup-token') in nanoclawd.env beside the config and add its name to agent.env", "lists"},
	} {
		got := MissingCredential(tt.agentEnv, tt.getenv)
		if !strings.Contains(got, tt.want) || strings.Contains(got, tt.not) {
			t.Errorf("MissingCredential(%v) = %q, want %q and not %q", tt.agentEnv, got, tt.want, tt.not)
		}
	}
	if f := NoCredential([]string{"ANTHROPIC_API_KEY"}, env()); f.Kind != "credential" || !f.Final || !strings.HasPrefix(f.Fix, "agent.env lists ANTHROPIC_API_KEY") || !strings.HasPrefix(f.What, "no model credential is set") {
		t.Errorf("NoCredential = %+v", f)
	}
	// Set but not handed on: the chat is not told that none is set.
	if f := NoCredential(nil, env("ANTHROPIC_API_KEY")); strings.Contains(f.What, "no model credential is set") || !strings.Contains(f.Fix, `add "ANTHROPIC_API_KEY" to agent.env`) {
		t.Errorf("NoCredential with the key set, unlisted = %+v", f)
	}
}
