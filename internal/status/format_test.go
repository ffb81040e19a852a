package status

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/backup"
	"github.com/nanoclawd/nanoclawd/internal/fit"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// busyReport is a daemon on a bad day: every section full, every free
// text (errors, prompts, paths, states) as long as the real ones get.
func busyReport(now time.Time) Report {
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	in := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	cost := func(v float64) *float64 { return &v }
	longErr := `API Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"nanoclaw relay: no model upstream answered (anthropic: HTTP 529, Overloaded; local/qwen2.5-coder-32b-instruct: no response headers within 60s)"}}`
	cfg, _ := json.Marshal(map[string]any{"AssistantName": "Andy", "DataDir": "/home/margaret/src/nanoclawd/data",
		"GroupsDir": "/home/margaret/src/nanoclawd/groups", "Agent": map[string]any{"Command": []string{"/home/margaret/src/nanoclawd/bin/node", "/home/margaret/src/nanoclawd/agent-runner/dist/index.js"}}})
	return Report{
		PID: 123456, Started: now.Add(-49 * time.Hour), Time: now, ConfigFile: "/home/margaret/src/nanoclawd/nanoclaw.config.jsonc",
		DatabaseBytes: 123 << 20,
		Channels: []Channel{
			{Name: "whatsapp", State: "disconnected since 2026-11-29T03:12:44+01:00: websocket: close 1006 (abnormal closure): unexpected EOF while reading the frame header", RetryAt: in(3 * time.Minute)},
			{Name: "telegram", Connected: true, State: "polling as @margarets_family_assistant_bot since 2026-11-28T22:01:13+01:00"},
			{Name: "local", Connected: true, State: "serving /home/margaret/src/nanoclawd/data/local.sock"},
		},
		Console: &Console{Error: "listen tcp 127.0.0.1:7457: bind: address already in use (another program holds the port: set console.listen)"},
		Agents:  Agents{Running: 1, Queued: 1, Standby: 1, MaxConcurrent: 5},
		Groups: []Group{
			{Folder: "main", IsMain: true, Agent: "running", RunningSince: ago(3 * time.Minute), RunningTask: "task-1732871234567-a1b2c3", QueuedTasks: 2,
				LastRun: &LastRun{Finished: now.Add(-time.Hour), OK: true, Stopped: true}, Model: "claude-sonnet-4-5-20250929", Provider: "anthropic",
				Usage: &Usage{Today: Spend{Requests: 1, CostUSD: cost(0.0001)}, Month: Spend{Requests: 1234, CostUSD: cost(12.3456)}}},
			{Folder: "family-weekend-plans", Trigger: "@Andy", Agent: "paused", LastRun: &LastRun{Finished: now.Add(-2 * time.Minute), Error: longErr},
				Model: "qwen2.5-coder-32b-instruct", Provider: "local", Fallback: &Fallback{Upstream: "anthropic/claude-haiku-4-5-20251001", Since: now.Add(-75 * time.Minute)},
				Usage: &Usage{Today: Spend{Requests: 3, Unpriced: []string{"qwen2.5-coder-32b-instruct"}}, Month: Spend{Requests: 40, CostUSD: cost(0.5), Unpriced: []string{"x"}},
					Daily: cost(1), Monthly: cost(20), Over: true}},
			{Folder: "book-club", Trigger: "@Andy", Agent: "retrying", Failures: 3, LastRun: &LastRun{Finished: now.Add(-40 * time.Second), Error: "agent for book-club stopped: exit status 3\nstderr: boom"}},
			{Folder: "work", Agent: "standby", StandbySince: ago(11 * time.Hour), LastRun: &LastRun{Finished: now.Add(-11 * time.Hour), OK: true}},
		},
		Unregistered: []Unheard{{ChatJID: "120363401234567890@g.us", Messages: 12}, {ChatJID: "tg:-1001234567890", Messages: 3}, {ChatJID: "491701234567@s.whatsapp.net", Messages: 1}},
		Outbox: []Backlog{{ChatJID: "120363401234567891@g.us", Count: 7, Oldest: now.Add(-26 * time.Minute), Attempts: 14,
			LastError: "send message to 120363401234567891@g.us: server returned error 479: the recipient's device list changed", RetryAt: in(90 * time.Second)}},
		NextTasks: []Task{{ID: "task-1732871234567-a1b2c3", Group: "family-weekend-plans", Schedule: "cron 0 9 * * 1-5", NextRun: now.Add(14*time.Hour + 3*time.Minute),
			Prompt: "Look at the weather for the weekend and suggest two outings for the children, with times and what to pack"}},
		Violations24h:  []Violations{{Group: "family-weekend-plans", Kind: "filesystem", Count: 12}, {Group: "book-club", Kind: "network", Count: 1}},
		LastBackup:     &backup.Last{Time: now.Add(-20 * time.Hour), OK: true, Archive: "/home/margaret/src/nanoclawd/data/backups/nanoclawd-2026-11-28T090000.tar.gz", Bytes: 123456789, Verified: true},
		NextBackup:     in(4 * time.Hour),
		PendingRestart: []string{"channels.telegram.token", "console.listen", "agent.command", "dataDir", "hostSecurity.sandbox"},
		ModelAPI: []usage.Health{
			{Kind: usage.HealthCredential, Status: 401, Detail: "the model API refused nanoclawd's credential (HTTP 401)", Since: now.Add(-time.Hour)},
			{Kind: usage.HealthDown, Status: 504, Detail: "not answering: nanoclaw relay: no model upstream answered (anthropic: no response headers within 60s; local/qwen2.5-coder-32b-instruct: connection refused)", Since: now.Add(-5 * time.Minute)},
			{Kind: usage.HealthRate, Status: 429, Detail: "rate limited", Since: now.Add(-time.Minute), RetryAt: now.Add(30 * time.Second)},
		},
		Config: cfg,
	}
}

// Every line of the text report fits in 100 columns, also on a busy day,
// and says what a person needs: a clean stop as "stopped", a small cost
// that is not $0.00, one request in the singular.
func TestFormatFitsIn100Columns(t *testing.T) {
	now := time.Now()
	var b strings.Builder
	if err := Format(&b, busyReport(now)); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for i, l := range strings.Split(text, "\n") {
		if fit.Len(l) > fit.Width {
			t.Errorf("line %d is %d columns wide: %q", i+1, fit.Len(l), l)
		}
	}
	for _, want := range []string{"stopped, 1h0m0s ago", "(abnormal closure): unexpected EOF while reading the frame header\n", "$0.0001 (1 request)", "$12.35 (1234 requests)", "failed 2m0s ago: API Error",
		"fallback anthropic/claude-haiku", "spent: $1.00/day", "messages from unregistered chats: 120363401234567890@g.us ×12",
		"paused (/resume it)", "@Andy …", "last backup: ok at", "no model upstream answered (anthropic: no response",
		"local/qwen2.5-coder-32b-instruct: connection refused)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if strings.Contains(text, "$0.00 (") || strings.Contains(text, "(1 requests)") {
		t.Errorf("a cost reads $0.00 or a single request is plural:\n%s", text)
	}
	if t.Failed() {
		t.Logf("the report:\n%s", text)
	}
}
