package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func load(t *testing.T, body string) (*Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nanoclaw.config.jsonc")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, body string
		want       []string // each must appear, in order, one per error line
	}{
		{"unknown key", "{\n  \"hostSecurity\": {\n    \"sandbx\": true\n  }\n}",
			[]string{`:3:5: unknown key "hostSecurity.sandbx" (did you mean "hostSecurity.sandbox"?)`}},
		{"wrong case", `{"assistantname": "X"}`,
			[]string{`:1:2: unknown key "assistantname" (keys are case-sensitive: write "assistantName")`}},
		{"duplicate key", "{\"agent\": {\n\"maxConcurrent\": 2,\n\"maxConcurrent\": 3}}",
			[]string{`:3:1: duplicate key "agent.maxConcurrent"`}},
		{"empty tools", "{\"hostSecurity\": {\"tools\": []}}",
			[]string{`:1:28: hostSecurity.tools is empty`, "remove the key to allow every tool"}},
		{"bypass refused", `{"hostSecurity": {"permissionMode": "bypassPermissions"}}`,
			[]string{`:1:37: hostSecurity.permissionMode: "bypassPermissions" is only for the main group`}},
		{"bad network rule", `{"hostSecurity": {"network": {"allowedDomains": ["ok.example", "10.0.0.0/33"]}}}`,
			[]string{`hostSecurity.network.allowedDomains[1]: "10.0.0.0/33" is not a CIDR`}},
		{"wrong type", `{"agent": {"maxConcurrent": "five"}}`,
			[]string{`:1:29: agent.maxConcurrent must be a whole number, not a string`}},
		{"range", `{"agent": {"maxConcurrent": 0}}`,
			[]string{`:1:29: agent.maxConcurrent is 0, below the minimum 1`}},
		{"bad duration", `{"alerts": {"cooldown": 60}}`,
			[]string{`:1:25: alerts.cooldown must be a duration string like "30m", not a number`}},
		{"bad days", `{"retention": {"usage": "1.5d"}}`,
			[]string{`:1:25: retention.usage: "1.5d" is not a number of days; write it like "90d"`}},
		{"negative retention", `{"retention": {"runs": "-1h"}}`,
			[]string{`retention.runs`}},
		{"bad zone", `{"timezone": "Mars/Base"}`,
			[]string{`:1:14: timezone: "Mars/Base" is not an IANA time zone`}},
		{"daily time", `{"alerts": {"daily": "25:00"}}`,
			[]string{`:1:22: alerts.daily: "25:00" is not a time of day; write it as "HH:MM"`}},
		{"backup without a dir", `{"backup": {"every": "24h"}}`,
			[]string{`:1:22: backup.every is set but backup.dir is not`}},
		{"empty fallback argument", `{"alerts": {"fallback": ["notify", ""]}}`,
			[]string{`alerts.fallback[1] is required`}},
		{"syntax", "{\n\"dataDir\": \"x\",,\n}",
			[]string{`:2:16: syntax error:`}},
		{"unset variable", `{"dataDir": "${NANOCLAW_TEST_UNSET_VAR}"}`,
			[]string{`:1:13: dataDir: environment variable is not set: ${NANOCLAW_TEST_UNSET_VAR}; set it, or give a default`}},
		{"transcriber without {file}", "{\"media\": {\"transcribe\": {\n\"command\": [\"whisper-cli\", \"-f\"]}}}",
			[]string{`:2:12: media.transcribe.command never names {file}`, `put {file} where the audio's path goes`}},
		{"transcriber URL", `{"media": {"transcribe": {"url": "api.openai.com"}}}`,
			[]string{`:1:34: media.transcribe.url: "api.openai.com" is not an http(s) URL`}},
		{"media limit", `{"media": {"maxBytes": 0}}`,
			[]string{`:1:24: media.maxBytes is 0, below the minimum 1`}},
		{"every problem at once, in file order", "{\"b\": 1,\n\"agent\": {\"timeout\": \"x\"}}",
			[]string{`:1:2: unknown key "b"`, `:2:22: agent.timeout: "x" is not a duration`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.body)
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("want Errors, got %v", err)
			}
			got := err.Error()
			rest := got
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error %q lacks %q", got, w)
				}
				rest = rest[i+len(w):]
			}
			for _, line := range strings.Split(got, "\n") {
				if !strings.Contains(line, "nanoclaw.config.jsonc:") {
					t.Errorf("line without FILE:LINE:COL: %q", line)
				}
			}
		})
	}
}

func TestMissingFileIsDefaults(t *testing.T) {
	dir := t.TempDir()
	cfg, err := Load(filepath.Join(dir, "none.jsonc"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AssistantName != "Andy" || cfg.DataDir != filepath.Join(dir, "data") || cfg.Agent.MaxConcurrent != 5 ||
		cfg.Agent.Timeout.D() != 30*time.Minute || cfg.Alerts.Cooldown.D() != time.Minute || !*cfg.HostSecurity.Sandbox ||
		cfg.DefaultTrigger() != "@Andy" || cfg.Channels.Local.Socket != filepath.Join(dir, "data/local.sock") {
		t.Errorf("defaults wrong: %+v", cfg)
	}
	if cfg.Agent.Command[1] != filepath.Join(dir, "agent-runner/dist/index.js") {
		t.Errorf("agent script not resolved against the config dir: %v", cfg.Agent.Command)
	}
}

func TestExpandAndResolve(t *testing.T) {
	t.Setenv("NC_TEST_NAME", "Bob")
	t.Setenv("NC_TEST_EMPTY", "")
	cfg, err := load(t, `{
		// comments and trailing commas are fine
		"assistantName": "${NC_TEST_NAME}",
		"dataDir": "${NC_TEST_EMPTY:-state}",
		"groupsDir": "/abs/groups",
		"agent": {"timeout": "90s", "command": ["/usr/bin/env", "tools/agent.sh", "--flag"],},
		"hostSecurity": {"denyRead": ["~/secret", "**/*.pem", "rel/dir"]},
	}`)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Dir(cfg.File)
	home, _ := os.UserHomeDir()
	if cfg.AssistantName != "Bob" || cfg.DataDir != filepath.Join(base, "state") || cfg.GroupsDir != "/abs/groups" || cfg.Agent.Timeout.D() != 90*time.Second {
		t.Errorf("got %+v", cfg)
	}
	if !reflect.DeepEqual(cfg.Agent.Command, []string{"/usr/bin/env", filepath.Join(base, "tools/agent.sh"), "--flag"}) {
		t.Errorf("command = %v", cfg.Agent.Command)
	}
	if !reflect.DeepEqual(cfg.HostSecurity.DenyRead, []string{filepath.Join(home, "secret"), "**/*.pem", filepath.Join(base, "rel/dir")}) {
		t.Errorf("denyRead = %v", cfg.HostSecurity.DenyRead)
	}
	if cfg.HostSecurity.Tools == nil || cfg.HostSecurity.PermissionMode != "default" {
		t.Error("keys left out lost their defaults")
	}
}

// The template that ships (the copy embedded in the binary, not an
// owner's config) must load, and change nothing but agent.env.
func TestTemplate(t *testing.T) {
	file := filepath.Join(t.TempDir(), DefaultFile)
	tmpl, err := Parse(file, Template)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := Load(file) // no such file: the defaults
	def.Agent.Env = tmpl.Agent.Env
	if !reflect.DeepEqual(tmpl, def) {
		t.Errorf("template differs from the defaults:\n%+v\n%+v", tmpl, def)
	}
	for _, tool := range DefaultTools {
		if !strings.Contains(string(Template), `"`+tool+`",`) {
			t.Errorf("template does not list tool %s on its own line", tool)
		}
	}
}

// Retention ages are written in days; the defaults keep messages.
func TestRetentionDays(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.jsonc")
	os.WriteFile(path, []byte(`{"retention": {"messages": "730d", "usage": "1d", "audit": "36h", "runs": "0"}}`), 0o600)
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Retention
	if r.Messages.D() != 730*Day || r.Usage.D() != Day || r.Audit.D() != 36*time.Hour || r.Runs != 0 {
		t.Errorf("retention %+v", r)
	}
	if d := Default().Retention; d.Messages != 0 || d.Usage.D() != 400*Day || d.Audit.D() != 400*Day || d.Runs.D() != 90*Day {
		t.Errorf("defaults %+v", d)
	}
	if b, _ := Duration(400 * Day).MarshalJSON(); string(b) != `"400d"` {
		t.Errorf("400 days written as %s", b)
	}
}

// The configured time zone is read once, and an unknown or empty one is
// the system's.
func TestLocation(t *testing.T) {
	c := &Config{Timezone: "Europe/Berlin"}
	loc := c.Location()
	if loc.String() != "Europe/Berlin" || c.Location() != loc || (&Config{Timezone: "Europe/Berlin"}).Location() != loc {
		t.Errorf("Location = %v, then %p and %p; want Europe/Berlin, read once", loc, c.Location(), loc)
	}
	for _, tz := range []string{"", "Nowhere/Atlantis"} {
		if got := (&Config{Timezone: tz}).Location(); got != time.Local {
			t.Errorf("timezone %q: Location = %v, want the system's", tz, got)
		}
	}
}

// A Telegram token is checked in shape at load: the error names the key
// and its place, says what is wrong, and never repeats the token.
func TestTelegramTokenShape(t *testing.T) {
	const secret = "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ" // 35 characters
	for _, tc := range []struct{ token, want string }{
		{`123456789:` + secret + `\u0001`, "character 36 after the colon is not a letter, digit, _ or -"},
		{`123456789:` + secret[1:], "the part after the colon is 34 characters long"},
		{`123456789:AAHdqTcvCH1vGWJ\u0001fSeofSAs0K5PALDsaw`, "character 16 after the colon is not a letter, digit, _ or -"},
		{secret, "it has no colon"},
		{`12a:` + secret, "the part before the colon is not the bot's number"},
	} {
		_, err := load(t, `{"channels": {"telegram": {"enabled": true,`+"\n"+`"token": "`+tc.token+`"}}}`)
		if err == nil {
			t.Errorf("%q: loaded", tc.token)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, ":2:10: channels.telegram.token is not a bot token ("+tc.want+")") ||
			!strings.Contains(msg, "@BotFather") || strings.Contains(msg, "AAHdqTcvCH1vGWJ") {
			t.Errorf("%q: %v", tc.token, err)
		}
	}
	cfg, err := load(t, `{"channels": {"telegram": {"token": "123456789:`+secret+`"}}}`)
	if err != nil || cfg.Channels.Telegram.Token != "123456789:"+secret {
		t.Errorf("a well-formed token: %v", err)
	}
}
