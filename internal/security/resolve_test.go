package security

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func ptr[T any](v T) *T { return &v }

var host = Host{
	Home:       "/home/op",
	ConfigFile: "/srv/nc/nanoclaw.config.jsonc",
	ConfigDir:  "/srv/nc",
	Layout:     layout.New("/srv/nc/data", "/srv/nc/groups"),
	Socket:     "/srv/nc/data/local.sock",
	Folders:    []string{"main", "family", "work"},
	AgentEnv:   []string{"ANTHROPIC_API_KEY", "GITHUB_TOKEN", "LANG"},
}

var global = Policy{
	Sandbox:        ptr(true),
	Tools:          []string{"Bash", "Read", "Write", "Edit", "Glob", "Grep", "WebSearch", "WebFetch"},
	PermissionMode: "default",
	DenyRead:       []string{"~/.ssh", "**/.env"},
	AllowWrite:     []string{},
	Network:        &Network{AllowedDomains: []string{}, DeniedDomains: []string{}},
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name  string
		group Group
		check func(t *testing.T, e Effective)
	}{
		{"main is exempt, overrides ignored", Group{Folder: "main", IsMain: true, Override: &Policy{Sandbox: ptr(true), Tools: []string{"Read"}}},
			func(t *testing.T, e Effective) {
				if e.Sandbox || e.PermissionMode != "bypassPermissions" || len(e.DenyRead) != 0 || !slices.Contains(e.Tools, "Bash") {
					t.Errorf("main not exempt: %+v", e)
				}
				if e.SDKOptions["allowDangerouslySkipPermissions"] != true {
					t.Error("main lacks allowDangerouslySkipPermissions")
				}
			}},
		{"non-main never bypasses, even if asked", Group{Folder: "family", Override: &Policy{PermissionMode: "bypassPermissions"}},
			func(t *testing.T, e Effective) {
				if e.PermissionMode == "bypassPermissions" || e.SDKOptions["permissionMode"] == "bypassPermissions" {
					t.Error("non-main got bypassPermissions")
				}
				if _, ok := e.SDKOptions["allowDangerouslySkipPermissions"]; ok {
					t.Error("non-main got allowDangerouslySkipPermissions")
				}
			}},
		{"override narrows tools", Group{Folder: "family", Override: &Policy{Tools: []string{"Read", "Grep"}}},
			func(t *testing.T, e Effective) {
				if !slices.Equal(e.Tools, []string{"Read", "Grep"}) {
					t.Errorf("tools = %v", e.Tools)
				}
				if slices.Contains(e.SDKOptions["allowedTools"].([]string), "Bash") {
					t.Error("narrowed-away Bash still pre-approved")
				}
			}},
		{"override widens tools", Group{Folder: "family", Override: &Policy{Tools: []string{"Read", "NotebookEdit", "Task"}}},
			func(t *testing.T, e Effective) {
				if !slices.Contains(e.Tools, "Task") || !slices.Contains(e.SDKOptions["tools"].([]string), "Task") {
					t.Errorf("tools = %v", e.Tools)
				}
			}},
		{"denyRead is a union; allowWrite a union plus the group folder", Group{Folder: "family", Override: &Policy{DenyRead: []string{"/srv/secret"}, AllowWrite: []string{"~/shared"}}},
			func(t *testing.T, e Effective) {
				for _, p := range []string{"/home/op/.ssh", "**/.env", "/srv/secret"} {
					if !slices.Contains(e.DenyRead, p) {
						t.Errorf("denyRead lacks %s: %v", p, e.DenyRead)
					}
				}
				if !slices.Equal(e.AllowWrite, []string{"/home/op/shared", "/srv/nc/groups/family"}) {
					t.Errorf("allowWrite = %v", e.AllowWrite)
				}
			}},
		{"other groups, daemon state and config denied; own folder not", Group{Folder: "family"},
			func(t *testing.T, e Effective) {
				for _, p := range []string{"/srv/nc/groups/main", "/srv/nc/groups/work", "/srv/nc/data/ipc", "/srv/nc/data/nanoclaw.db", "/srv/nc/nanoclaw.config.jsonc", "/srv/nc/data/local.sock", "/srv/nc/data/sessions/work"} {
					if !slices.Contains(e.DenyRead, p) {
						t.Errorf("denyRead lacks %s", p)
					}
				}
				if slices.Contains(e.DenyRead, "/srv/nc/groups/family") {
					t.Error("own folder denied")
				}
			}},
		{"sandbox off means no Bash pre-approval", Group{Folder: "family", Override: &Policy{Sandbox: ptr(false)}},
			func(t *testing.T, e Effective) {
				if e.Sandbox || slices.Contains(e.SDKOptions["allowedTools"].([]string), "Bash") {
					t.Error("unsandboxed Bash would be pre-approved")
				}
			}},
		{"network from override, else global", Group{Folder: "family", Override: &Policy{Network: &Network{AllowedDomains: []string{"api.github.com"}}}},
			func(t *testing.T, e Effective) {
				if !slices.Equal(e.Network.AllowedDomains, []string{"api.github.com"}) || e.Network.DeniedDomains == nil {
					t.Errorf("network = %+v", e.Network)
				}
			}},
		{"secrets hidden from commands", Group{Folder: "family"},
			func(t *testing.T, e Effective) {
				for _, s := range []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "NANOCLAW_IPC_TOKEN", "GITHUB_TOKEN"} {
					if !slices.Contains(e.SecretEnv, s) {
						t.Errorf("secretEnv lacks %s", s)
					}
				}
				if slices.Contains(e.SecretEnv, "LANG") {
					t.Error("LANG treated as a secret")
				}
			}},
		{"write tools scoped, nanoclaw tools always there", Group{Folder: "family", Override: &Policy{Tools: []string{"Write"}}},
			func(t *testing.T, e Effective) {
				allowed := e.SDKOptions["allowedTools"].([]string)
				if slices.Contains(allowed, "Write") || !slices.Contains(allowed, "Write(//srv/nc/groups/family/**)") {
					t.Errorf("allowedTools = %v", allowed)
				}
				if !slices.Contains(allowed, NanoclawTools) || !slices.Contains(e.SDKOptions["tools"].([]string), NanoclawTools) {
					t.Error("nanoclaw tools missing")
				}
			}},
		{"file tools get deny rules for every denied path", Group{Folder: "family"},
			func(t *testing.T, e Effective) {
				deny := e.SDKOptions["settings"].(map[string]any)["permissions"].(map[string]any)["deny"].([]string)
				for _, r := range []string{"Read(//home/op/.ssh/**)", "Edit(//home/op/.ssh/**)", "Read(**/.env)", "Read(//srv/nc/groups/work/**)", "Edit(//srv/nc/groups/family/.claude/**)"} {
					if !slices.Contains(deny, r) {
						t.Errorf("deny rules lack %s", r)
					}
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.check(t, Resolve(global, tt.group, host)) })
	}
}

// TestGolden pins the exact sdkOptions for a main group, a default group and
// an overridden group. Run with -update after an intended change.
func TestGolden(t *testing.T) {
	cases := map[string]Group{
		"main":       {Folder: "main", IsMain: true},
		"default":    {Folder: "family"},
		"overridden": {Folder: "work", Override: &Policy{Sandbox: ptr(true), Tools: []string{"Read", "Write", "Bash"}, PermissionMode: "acceptEdits", DenyRead: []string{"~/Documents"}, AllowWrite: []string{"/srv/shared"}, Network: &Network{AllowedDomains: []string{"github.com"}, DeniedDomains: []string{"evil.example"}}}},
	}
	for name, g := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(Resolve(global, g, host).SDKOptions, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "sdkoptions-"+name+".golden.json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update once)", err)
			}
			if string(want) != string(got)+"\n" {
				t.Errorf("sdkOptions for %s differ from %s:\n%s", name, path, got)
			}
		})
	}
}

// Each name of agent.env that looks like a secret is held back from a
// confined run unless the group's override lets it in; the model
// credentials enter as placeholders; the main group gets everything.
func TestEnvPolicy(t *testing.T) {
	h := host
	h.AgentEnv = []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "GITHUB_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY",
		"OPENAI_API_KEY", "GCP_CREDENTIALS", "LANG", "HOSTILE_READ"}
	e := Resolve(Policy{}, Group{Folder: "family", Override: &Policy{Env: []string{"DB_PASSWORD", "NOT_IN_AGENT_ENV"}}}, h)
	names := func(vs []EnvVar) string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return strings.Join(out, ",")
	}
	if got := names(e.Env.Enter); got != "ANTHROPIC_API_KEY,CLAUDE_CODE_OAUTH_TOKEN,DB_PASSWORD,LANG,HOSTILE_READ" {
		t.Errorf("enter: %s", got)
	}
	if got := names(e.Env.HeldBack); got != "GITHUB_TOKEN,AWS_SECRET_ACCESS_KEY,OPENAI_API_KEY,GCP_CREDENTIALS" {
		t.Errorf("held back: %s", got)
	}
	for _, v := range e.Env.HeldBack {
		if !strings.Contains(v.Why, `override "env"`) {
			t.Errorf("%s held back without the fix: %q", v.Name, v.Why)
		}
	}
	if e.Passes("GITHUB_TOKEN") || !e.Passes("DB_PASSWORD") || e.Passes("NOT_IN_AGENT_ENV") {
		t.Error("Passes disagrees with the lists")
	}
	m := Resolve(Policy{}, Group{Folder: "main", IsMain: true}, h)
	if len(m.Env.HeldBack) != 0 || !m.Passes("GITHUB_TOKEN") {
		t.Errorf("main: %+v", m.Env)
	}
}

// The group's model and provider: the override's, else the host's; the
// SDK is handed the model, the main group's too; no model, no key.
func TestResolveModel(t *testing.T) {
	h := Host{Home: "/home/o", ConfigDir: "/etc/n", Model: "claude-sonnet-4-5", Provider: "anthropic"}
	for _, c := range []struct {
		g               Group
		host            Host
		model, provider string
	}{
		{Group{Folder: "family"}, h, "claude-sonnet-4-5", "anthropic"},
		{Group{Folder: "family", Override: &Policy{Model: "qwen", Provider: "local"}}, h, "qwen", "local"},
		{Group{Folder: "main", IsMain: true, Override: &Policy{Model: "claude-opus-4-5"}}, h, "claude-opus-4-5", "anthropic"},
		{Group{Folder: "family"}, Host{Home: "/home/o"}, "", "anthropic"},
	} {
		e := Resolve(Policy{}, c.g, c.host)
		got, has := e.SDKOptions["model"]
		if e.Model != c.model || e.Provider != c.provider || has != (c.model != "") || (has && got != c.model) {
			t.Errorf("%s %+v: model %q provider %q sdkOptions.model %v", c.g.Folder, c.g.Override, e.Model, e.Provider, got)
		}
	}
	if p := (&Policy{Model: "x"}).WithModel(""); p != nil {
		t.Errorf("an override holding only a model, cleared: %+v", p)
	}
	if p := (&Policy{Env: []string{"A"}}).WithModel("x"); p == nil || p.Model != "x" || p.Env[0] != "A" {
		t.Errorf("WithModel lost the rest: %+v", p)
	}
}

// A credential failure is a missing credential when agents get none.
func TestCredentialSet(t *testing.T) {
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-x"}
	getenv := func(k string) string { return env[k] }
	if !CredentialSet([]string{"ANTHROPIC_API_KEY"}, getenv) {
		t.Error("a set and passed key counts as no credential")
	}
	if CredentialSet([]string{"CLAUDE_CODE_OAUTH_TOKEN"}, getenv) {
		t.Error("a key agent.env does not pass counts as a credential")
	}
	if CredentialSet([]string{"ANTHROPIC_API_KEY"}, func(string) string { return "" }) {
		t.Error("an unset variable counts as a credential")
	}
}
