package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// The tests run the built binary, as an operator types it. The terminal
// tests run this test binary as nanoclawd instead (fakeNanoclawdEnv set),
// with WhatsApp pairing faked at setup.Pairer.
func TestMain(m *testing.M) {
	if os.Getenv(fakeNanoclawdEnv) != "" {
		newPairer = fakePairer
		main()
		os.Exit(0)
	}
	e2e.Main(m)
}

func mustCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, errs, code := e2e.Run(t, dir, nil, args...)
	if code != 0 {
		t.Fatalf("nanoclawd %v: exit %d: %s", args, code, errs)
	}
	return out
}

func failCLI(t *testing.T, dir, want string, args ...string) {
	t.Helper()
	_, errs, code := e2e.Run(t, dir, nil, args...)
	if code == 0 {
		t.Fatalf("nanoclawd %v succeeded, want failure mentioning %q", args, want)
	}
	if !strings.Contains(errs, want) {
		t.Fatalf("nanoclawd %v: stderr %q lacks %q", args, errs, want)
	}
}

func newInstall(t *testing.T) (dir, cfg string) {
	dir = t.TempDir()
	cfg = filepath.Join(dir, "conf", "nanoclaw.config.jsonc")
	os.MkdirAll(filepath.Dir(cfg), 0o755)
	if err := os.WriteFile(cfg, []byte(`{"dataDir": "state", "groupsDir": "g", "agent": {"env": ["ANTHROPIC_API_KEY", "GH_TOKEN"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}

type listed struct {
	JID             string          `json:"jid"`
	Name            string          `json:"name"`
	Folder          string          `json:"folder"`
	IsMain          bool            `json:"isMain"`
	Trigger         string          `json:"trigger"`
	RequiresTrigger bool            `json:"requiresTrigger"`
	Security        json.RawMessage `json:"security"`
}

func TestGroupsLifecycle(t *testing.T) {
	dir, cfg := newInstall(t)
	// Flags and positionals in any order, --config before or after the verb.
	mustCLI(t, dir, "--config", cfg, "groups", "add", "--jid", "local:main", "--name", "Main", "--folder", "main", "--main")
	mustCLI(t, dir, "groups", "add", "--folder", "family", "--config", cfg, "--jid", "120363@g.us", "--name", "Family")
	mustCLI(t, dir, "groups", "add", "--jid", "local:ops", "--name", "Ops", "--folder", "ops", "--no-trigger", "--trigger", "!bot", "--config="+cfg)

	var groups []listed
	if err := json.Unmarshal([]byte(mustCLI(t, dir, "groups", "list", "--json", "--config", cfg)), &groups); err != nil {
		t.Fatal(err)
	}
	byFolder := map[string]listed{}
	for _, g := range groups {
		byFolder[g.Folder] = g
	}
	if m := byFolder["main"]; !m.IsMain || m.RequiresTrigger || string(m.Security) != "null" {
		t.Errorf("main = %+v", m)
	}
	if f := byFolder["family"]; f.Trigger != "@Andy" || !f.RequiresTrigger || f.JID != "120363@g.us" || f.Name != "Family" {
		t.Errorf("family = %+v", f)
	}
	if o := byFolder["ops"]; o.RequiresTrigger || o.Trigger != "!bot" {
		t.Errorf("ops = %+v", o)
	}
	if _, err := os.Stat(filepath.Join(dir, "conf", "g", "family", "CLAUDE.md")); err != nil {
		t.Errorf("group folder not created beside the config: %v", err)
	}

	failCLI(t, dir, "already registered", "groups", "add", "--config", cfg, "--jid", "120363@g.us", "--name", "X", "--folder", "other")
	failCLI(t, dir, "already registered", "groups", "add", "--config", cfg, "--jid", "new@g.us", "--name", "X", "--folder", "family")
	failCLI(t, dir, "a main group is already registered", "groups", "add", "--config", cfg, "--jid", "m2@g.us", "--name", "X", "--folder", "m2", "--main")
	for _, bad := range []string{"../evil", "global", "a/b", "-x", ".hidden", strings.Repeat("a", 65)} {
		failCLI(t, dir, "invalid folder name", "groups", "add", "--config", cfg, "--jid", "x@g.us", "--name", "X", "--folder", bad)
	}
	failCLI(t, dir, "--jid is required", "groups", "add", "--config", cfg, "--folder", "x")
	failCLI(t, dir, "unknown command", "groups", "frobnicate", "--config", cfg)

	mustCLI(t, dir, "groups", "remove", "ops", "--config", cfg)
	failCLI(t, dir, "group not found", "groups", "remove", "ops", "--config", cfg)
	if _, err := os.Stat(filepath.Join(dir, "conf", "g", "ops")); err != nil {
		t.Error("remove deleted the folder")
	}
}

func TestSetSecurityAndShow(t *testing.T) {
	dir, cfg := newInstall(t)
	mustCLI(t, dir, "--config", cfg, "groups", "add", "--jid", "local:main", "--name", "Main", "--folder", "main", "--main")
	mustCLI(t, dir, "--config", cfg, "groups", "add", "--jid", "local:family", "--name", "Family", "--folder", "family")

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\n  \"tools\": [\"Read\"],\n  \"Sandbox\": false,\n  \"permissionMode\": \"bypassPermissions\"\n}"), 0o600)
	_, errs, code := e2e.Run(t, dir, nil, "groups", "set-security", "family", "--file", bad, "--config", cfg)
	if code == 0 || !strings.Contains(errs, bad+`:3:3: unknown key "Sandbox" (keys are case-sensitive: write "sandbox")`) ||
		!strings.Contains(errs, bad+`:4:21: permissionMode: "bypassPermissions" is only for the main group`) {
		t.Fatalf("bad override: exit %d, %s", code, errs)
	}

	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"tools": ["Read", "Grep"], "denyRead": ["/srv/private"], "network": {"allowedDomains": ["api.github.com"]}}`), 0o600)
	mustCLI(t, dir, "groups", "set-security", "--file", good, "family", "--config", cfg)

	var eff struct {
		Group          string   `json:"group"`
		IsMain         bool     `json:"isMain"`
		Sandbox        bool     `json:"sandbox"`
		Tools          []string `json:"tools"`
		PermissionMode string   `json:"permissionMode"`
		SettingSources []string `json:"settingSources"`
		DenyRead       []string `json:"denyRead"`
		AllowWrite     []string `json:"allowWrite"`
		Network        struct {
			AllowedDomains []string `json:"allowedDomains"`
			DeniedDomains  []string `json:"deniedDomains"`
		} `json:"network"`
		SDKOptions map[string]any `json:"sdkOptions"`
	}
	out := mustCLI(t, dir, "--config", cfg, "security", "show", "family", "--json")
	if err := json.Unmarshal([]byte(out), &eff); err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	if eff.Group != "family" || eff.IsMain || !eff.Sandbox || strings.Join(eff.Tools, ",") != "Read,Grep" ||
		eff.PermissionMode != "default" || strings.Join(eff.SettingSources, ",") != "project" ||
		strings.Join(eff.Network.AllowedDomains, ",") != "api.github.com" || eff.Network.DeniedDomains == nil {
		t.Errorf("effective policy: %s", out)
	}
	for _, p := range []string{filepath.Join(home, ".ssh"), "/srv/private", filepath.Join(dir, "conf", "g", "main"), cfg} {
		if !strings.Contains(strings.Join(eff.DenyRead, "\n"), p) {
			t.Errorf("denyRead lacks %s", p)
		}
	}
	if eff.SDKOptions["permissionMode"] != "default" || eff.SDKOptions["cwd"] != filepath.Join(dir, "conf", "g", "family") {
		t.Errorf("sdkOptions: %v", eff.SDKOptions)
	}
	if !strings.Contains(out, `"GH_TOKEN"`) {
		t.Error("GH_TOKEN from agent.env not hidden from commands")
	}

	out = mustCLI(t, dir, "--config", cfg, "security", "show", "--json", "main")
	if !strings.Contains(out, `"bypassPermissions"`) || !strings.Contains(out, `"isMain": true`) {
		t.Errorf("main: %s", out)
	}
	mustCLI(t, dir, "--config", cfg, "groups", "set-security", "family", "--clear")
	if out := mustCLI(t, dir, "--config", cfg, "groups", "list", "--json"); strings.Contains(out, "api.github.com") {
		t.Error("--clear kept the override")
	}
	failCLI(t, dir, "group not found", "--config", cfg, "security", "show", "nope")
}

func TestImportIdempotent(t *testing.T) {
	dir, cfg := newInstall(t)
	file := filepath.Join(dir, "registered_groups.json")
	os.WriteFile(file, []byte(`{
	  "1203@g.us": {"name": "Family", "folder": "family", "trigger": "@Andy", "added_at": "2025-01-02T03:04:05.000Z"},
	  "4915@s.whatsapp.net": {"name": "Me", "folder": "main", "trigger": "@Andy", "added_at": "2025-01-01T00:00:00.000Z"},
	  "9999@g.us": {"name": "Open", "folder": "open", "trigger": "@Andy", "added_at": "2025-01-01T00:00:00.000Z", "requiresTrigger": false}
	}`), 0o600)
	if out := mustCLI(t, dir, "--config", cfg, "groups", "import", file); !strings.Contains(out, "imported 3 group(s), 0 already") {
		t.Errorf("first import: %s", out)
	}
	if out := mustCLI(t, dir, "--config", cfg, "groups", "import", file); !strings.Contains(out, "imported 0 group(s), 3 already") || strings.Contains(out, "add ") {
		t.Errorf("second import: %s", out)
	}
	var groups []listed
	json.Unmarshal([]byte(mustCLI(t, dir, "--config", cfg, "groups", "list", "--json")), &groups)
	if len(groups) != 3 || groups[0].Folder != "main" || !groups[0].IsMain || groups[2].Folder != "open" || groups[2].RequiresTrigger {
		t.Errorf("imported: %+v", groups)
	}
	os.WriteFile(file, []byte(`[1,2]`), 0o600)
	failCLI(t, dir, "not a NanoClaw registered_groups.json", "--config", cfg, "groups", "import", file)
}

func TestConfigCheck(t *testing.T) {
	dir, cfg := newInstall(t)
	if out := mustCLI(t, dir, "config", "check", "--config", cfg); !strings.Contains(out, "ok") {
		t.Errorf("valid config: %s", out)
	}
	os.WriteFile(cfg, []byte("{\n  \"hostSecurity\": {\"sandbx\": false}\n}"), 0o600)
	_, errs, code := e2e.Run(t, dir, nil, "--config", cfg, "config", "check")
	if code == 0 || !strings.HasPrefix(errs, cfg+`:2:20: unknown key "hostSecurity.sandbx"`) {
		t.Errorf("exit %d: %s", code, errs)
	}
	// Every command refuses to run on an invalid config.
	failCLI(t, dir, `unknown key "hostSecurity.sandbx"`, "--config", cfg, "groups", "list")
}

// With no route to WhatsApp (as on this machine), login fails fast with one
// clear line instead of hanging.
func TestWhatsAppLoginOffline(t *testing.T) {
	if _, err := net.LookupHost("web.whatsapp.com"); err == nil {
		t.Skip("web.whatsapp.com resolves here; this test needs a machine without a route to WhatsApp")
	}
	dir, cfg := newInstall(t)
	start := time.Now()
	_, errs, code := e2e.Run(t, dir, nil, "whatsapp", "login", "--config", cfg)
	if code == 0 || !strings.Contains(errs, "cannot reach WhatsApp") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("exit %d: %q", code, errs)
	}
	t.Logf("failed after %v: %s", time.Since(start), errs)
	failCLI(t, dir, "--phone wants the full international number", "whatsapp", "login", "--phone", "+49 (170) abc", "--config", cfg)
}

// `whatsapp groups` lists the WhatsApp groups the daemon has cached (with
// the registered folder, if any); `whatsapp logout` without a pairing is a
// no-op; a bad --owner is refused before anything else happens.
func TestWhatsAppGroupsLogoutOwner(t *testing.T) {
	dir, cfg := newInstall(t)
	if out := mustCLI(t, dir, "whatsapp", "groups", "--config", cfg); !strings.Contains(out, "no WhatsApp groups known yet") {
		t.Errorf("empty cache: %q", out)
	}
	db, err := store.Open(filepath.Join(dir, "conf", "state"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]any{{"120363000000000009@g.us", "Family", 1}, {"491700000002@s.whatsapp.net", "Alice", 0}, {"local:x", "X", 1}} {
		if _, err := db.ExecContext(context.Background(), `INSERT INTO chats (jid, name, is_group, last_activity) VALUES (?, ?, ?, 0)`, c...); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	mustCLI(t, dir, "groups", "add", "--jid", "120363000000000009@g.us", "--name", "Family", "--folder", "family", "--config", cfg)
	var got []struct{ JID, Name, Folder string }
	if err := json.Unmarshal([]byte(mustCLI(t, dir, "--config", cfg, "whatsapp", "groups", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].JID != "120363000000000009@g.us" || got[0].Name != "Family" || got[0].Folder != "family" {
		t.Errorf("whatsapp groups --json = %+v, want only the Family group, registered as family", got)
	}
	if out := mustCLI(t, dir, "whatsapp", "logout", "--config", cfg); !strings.Contains(out, "not paired") {
		t.Errorf("logout unpaired: %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "conf", "state", "whatsapp.db")); err == nil {
		t.Error("logout created a WhatsApp store")
	}
	failCLI(t, dir, "--owner wants your full international number", "whatsapp", "login", "--owner", "0170 123", "--config", cfg)
}

// flagLine is one flag in a command's help: the flag, its argument's name
// if it takes one, and a description.
var flagLine = regexp.MustCompile(`^  --[a-z-]+( [A-Z][A-Za-z.]*)?   +\S`)

// Every verb of the table is in 'nanoclawd help' with its summary; each
// one's --help (and -h, and 'help VERB') prints its usage line and every
// flag with a description, exits 0 and touches nothing, not even the
// config.
func TestHelp(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "nanoclaw.config.jsonc"), []byte(`{"not a key": 1}`), 0o600)
	list := mustCLI(t, dir, "help")
	if !strings.Contains(list, "into your WhatsApp and Telegram chats") {
		t.Errorf("'nanoclawd help' does not name both chat networks:\n%s", list)
	}
	for _, c := range commands {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c.name) + ` +` + regexp.QuoteMeta(c.summary) + `$`).MatchString(list) {
			t.Errorf("'nanoclawd help' lacks the line of %s:\n%s", c.name, list)
		}
		if u := c.cmd.Usage(); u != c.name && !strings.HasPrefix(u, c.name+" ") {
			t.Errorf("the usage of %s is %q: it does not start with the verb", c.name, u)
		}
	}
	if out := mustCLI(t, dir, "--help"); out != list {
		t.Errorf("--help differs from help:\n%s", out)
	}
	for _, c := range commands {
		verb := strings.Fields(c.name)
		help := mustCLI(t, dir, append(verb, "--help")...)
		if !strings.HasPrefix(help, "usage: nanoclawd "+c.cmd.Usage()+"\n\n"+c.summary+"\n\nflags:\n") {
			t.Errorf("%s --help:\n%s", c.name, help)
		}
		flags := strings.Split(strings.TrimRight(help[strings.Index(help, "flags:\n")+7:], "\n"), "\n")
		for _, l := range flags {
			if !flagLine.MatchString(l) {
				t.Errorf("%s --help: flag line %q has no argument name or description", c.name, l)
			}
		}
		// Every flag the usage line names is explained.
		for _, f := range regexp.MustCompile(`--[a-z-]+`).FindAllString(c.cmd.Usage(), -1) {
			if !strings.Contains(help, "\n  "+f+" ") {
				t.Errorf("%s --help does not explain %s:\n%s", c.name, f, help)
			}
		}
		if !strings.Contains(help, "\n  --config FILE ") {
			t.Errorf("%s --help does not mention --config", c.name)
		}
		if h := mustCLI(t, dir, append(verb, "-h", "--config", "elsewhere.jsonc")...); h != help {
			t.Errorf("%s -h differs from --help:\n%s", c.name, h)
		}
	}
	if h, want := mustCLI(t, dir, "help", "groups", "add"), mustCLI(t, dir, "groups", "add", "--help"); h != want {
		t.Errorf("help groups add differs from groups add --help:\n%s", h)
	}
	groups := mustCLI(t, dir, "groups", "--help")
	if !strings.Contains(groups, "  groups reset-session ") || strings.Contains(groups, "whatsapp") {
		t.Errorf("groups --help:\n%s", groups)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("help created files: %v", entries)
	}
}

// A flag a command does not have fails with one line that names it and
// points at --help, before anything else happens; so do a missing verb, a
// missing argument and a flag without its value.
func TestUsageErrors(t *testing.T) {
	dir, cfg := newInstall(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"groups", "add", "--jid", "local:x", "--frob", "--folder", "x"}, "groups add: unknown flag --frob; see 'nanoclawd groups add --help'"},
		{[]string{"status", "-bogus"}, "status: unknown flag --bogus; see 'nanoclawd status --help'"},
		{[]string{"security", "show", "family", "--jsn"}, "security show: unknown flag --jsn; see 'nanoclawd security show --help'"},
		{[]string{"run", "--dry-run"}, "run: unknown flag --dry-run; see 'nanoclawd run --help'"},
		{[]string{"groups", "add", "--folder", "x", "--jid"}, "groups add: a value is missing after --jid; see 'nanoclawd groups add --help'"},
		{[]string{"groups", "remove"}, "groups remove: an argument is missing; usage: nanoclawd groups remove FOLDER"},
		{[]string{"groups", "list", "extra"}, `groups list: unexpected argument "extra"; usage: nanoclawd groups list [--json]`},
		{[]string{"groups"}, "groups needs a verb: nanoclawd groups takes one of list, add, remove, set-security, import, reset-session, set-model"},
		{[]string{"frobnicate"}, `unknown command "frobnicate": run 'nanoclawd help' for the list`},
	} {
		out, errs, code := e2e.Run(t, dir, nil, append(tc.args, "--config", cfg)...)
		if code == 0 || out != "" || errs != "nanoclawd: "+tc.want+"\n" && !strings.HasPrefix(errs, "nanoclawd: "+tc.want+" ") {
			t.Errorf("nanoclawd %v: exit %d, stdout %q, stderr %q; want one line %q", tc.args, code, out, errs, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "conf", "state")); err == nil {
		t.Error("a command line that was refused opened the data dir")
	}
}
