package doctor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/whatsapp"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
)

// script writes an executable shell script into dir.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// lookIn finds programs only among the given ones.
func lookIn(progs map[string]string) func(string) (string, error) {
	return func(name string) (string, error) {
		if p, ok := progs[name]; ok {
			return p, nil
		}
		if filepath.IsAbs(name) {
			if _, err := os.Stat(name); err == nil {
				return name, nil
			}
		}
		return "", exec.ErrNotFound
	}
}

func check(t *testing.T, r Result, wantOK bool, wantIn string) {
	t.Helper()
	if r.OK != wantOK || !strings.Contains(unwrap(r), wantIn) {
		t.Errorf("got %q, want ok=%v containing %q", r.String(), wantOK, wantIn)
	}
}

// unwrap is r as one line, its wrapping to 100 columns undone.
func unwrap(r Result) string {
	lines := strings.Split(r.String(), "\n")
	for i := range lines[1:] {
		lines[i+1] = strings.TrimLeft(lines[i+1], " ")
	}
	return strings.Join(lines, " ")
}

func TestResultString(t *testing.T) {
	if s := ok("node", "v20").String(); s != "ok   node: v20" {
		t.Errorf("%q", s)
	}
	r := fix("config", "2 problems")
	r.More = []string{"a:1:2: x"}
	if s := r.String(); s != "FIX  config: 2 problems\n     a:1:2: x" {
		t.Errorf("%q", s)
	}
}

func TestNodeMajor(t *testing.T) {
	for in, want := range map[string]int{"v20.11.1": 20, "v18.19.0": 18, "v22.0.0-nightly": 22, "20.1.0": -1, "": -1, "vX": -1} {
		n, valid := NodeMajor(in)
		if !valid {
			n = -1
		}
		if n != want {
			t.Errorf("NodeMajor(%q) = %d, want %d", in, n, want)
		}
	}
}

// A node line past its end of life is something to fix.
func TestNodePastEOL(t *testing.T) {
	day := func(s string) time.Time { d, _ := time.Parse(time.DateOnly, s); return d.Add(12 * time.Hour) }
	for _, c := range []struct {
		major int
		at    string
		want  string
	}{
		{20, "2026-04-30", ""}, {20, "2026-05-01", "2026-04-30"}, {22, "2026-11-27", ""},
		{22, "2027-05-01", "2027-04-30"}, {24, "2026-11-27", ""}, {99, "2030-01-01", ""},
	} {
		if got := nodePastEOL(c.major, day(c.at)); got != c.want {
			t.Errorf("node %d on %s: %q, want %q", c.major, c.at, got, c.want)
		}
	}
}

func TestNode(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		ok         bool
		want       string
	}{
		{"node24", "echo v24.21.0", true, "v24.21.0"},
		{"node20", "echo v20.9.0", false, "too old: the agent runner needs node 22 or later"},
		{"nodeweird", "echo hello", false, "not a node version"},
		{"nodefail", "exit 2", false, "--version failed"},
	} {
		p := script(t, dir, tc.name, tc.body)
		check(t, Node(context.Background(), Env{LookPath: lookIn(map[string]string{"node": p})}, "node"), tc.ok, tc.want)
	}
	check(t, Node(context.Background(), Env{LookPath: lookIn(nil)}, "node"), false, "node not found on PATH")
}

func TestSandbox(t *testing.T) {
	dir := t.TempDir()
	good := script(t, dir, "bwrap-good", `case "$*" in *--unshare-user*--unshare-pid*--unshare-net*) ;; *) exit 9;; esac`)
	bad := script(t, dir, "bwrap-bad", `echo "bwrap: setting up uid map: Permission denied" >&2; exit 1`)
	ctx := context.Background()
	for _, tc := range []struct {
		goos  string
		progs map[string]string
		ok    bool
		want  string
	}{
		{"linux", map[string]string{"bwrap": good}, true, "bwrap (a test sandbox"},
		{"linux", nil, false, "bwrap not found: non-main groups cannot run"},
		{"linux", map[string]string{"bwrap": bad}, false, "cannot build an agent's sandbox (bwrap: setting up uid map: Permission denied)"},
		{"darwin", map[string]string{"sandbox-exec": "/usr/bin/sandbox-exec"}, true, "sandbox-exec"},
		{"darwin", nil, false, "sandbox-exec not found"},
		{"windows", nil, false, "no sandbox on windows"},
	} {
		r := Sandbox(ctx, Env{GOOS: tc.goos, LookPath: lookIn(tc.progs)}, sandbox.User{UID: os.Getuid(), GID: os.Getgid()})
		check(t, r, tc.ok, tc.want)
		// On a Mac, what its sandbox lacks against Linux's, one line each.
		if tc.ok && !slices.Equal(r.More, sandbox.Weaker(tc.goos)) {
			t.Errorf("%s: sandbox says %q, want %q", tc.goos, r.More, sandbox.Weaker(tc.goos))
		}
	}
}

func TestAgentRunnerAndSDK(t *testing.T) {
	root := t.TempDir()
	index := filepath.Join(root, "agent-runner", "dist", "index.js")
	os.MkdirAll(filepath.Dir(index), 0o755)
	env := Env{LookPath: lookIn(map[string]string{"node": "/usr/bin/node"})}

	s, r := AgentRunner(env, []string{"node", index})
	check(t, r, false, index+" (from agent.command")
	check(t, SDK(s), false, "cd "+filepath.Join(root, "agent-runner")+" && npm ci")

	os.WriteFile(index, nil, 0o644)
	s, r = AgentRunner(env, []string{"node", "--enable-source-maps", index})
	check(t, r, true, index)
	// Found the way node resolves it: in a node_modules further up.
	pkg := filepath.Join(root, "node_modules", SDKPackage, "package.json")
	os.MkdirAll(filepath.Dir(pkg), 0o755)
	os.WriteFile(pkg, []byte(`{"name":"@anthropic-ai/claude-agent-sdk","version":"0.3.330"}`), 0o644)
	check(t, SDK(s), true, "@anthropic-ai/claude-agent-sdk 0.3.330")
	os.WriteFile(pkg, []byte(`{`), 0o644)
	check(t, SDK(s), false, "unreadable")

	s, r = AgentRunner(env, []string{"/bin/sh", "-c", "exit 0"})
	check(t, r, true, "custom agent.command")
	check(t, SDK(s), true, "not checked")
	_, r = AgentRunner(env, []string{"/nonexistent/agent"})
	check(t, r, false, "is not an executable program")
}

func TestCredentials(t *testing.T) {
	// The API accepts only "secret" (any credential header).
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || r.Header.Get("x-api-key")+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ") != "secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"data":[]}`))
	}))
	defer api.Close()
	cfg := &config.Config{File: "/x/nanoclaw.config.jsonc"}
	for _, tc := range []struct {
		set, listed []string
		value, base string
		ok          bool
		want        string
	}{
		{[]string{"ANTHROPIC_API_KEY"}, []string{"ANTHROPIC_API_KEY"}, "secret", api.URL, true, "ok   credentials: ANTHROPIC_API_KEY is set, passed to agents (agent.env) and accepted by the API"},
		{[]string{"CLAUDE_CODE_OAUTH_TOKEN"}, []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}, "secret", api.URL, true, "CLAUDE_CODE_OAUTH_TOKEN is set, passed to agents (agent.env) and accepted"},
		{[]string{"ANTHROPIC_API_KEY"}, []string{"ANTHROPIC_API_KEY"}, "sk-dummy", api.URL, false, "FIX  credentials: ANTHROPIC_API_KEY is set, but the API rejected it (401 Unauthorized"},
		{[]string{"ANTHROPIC_API_KEY"}, []string{"ANTHROPIC_API_KEY"}, "secret", "http://127.0.0.1:1", true, "--   credentials: ANTHROPIC_API_KEY is set and passed to agents (agent.env); not checked: the API could not be reached"},
		{[]string{"ANTHROPIC_API_KEY"}, nil, "secret", api.URL, false, `add "ANTHROPIC_API_KEY" to agent.env in /x/nanoclaw.config.jsonc`},
		{nil, []string{"ANTHROPIC_API_KEY"}, "", api.URL, false, "agent.env lists ANTHROPIC_API_KEY but it is not set"},
		{nil, nil, "", api.URL, false, "no API credentials"},
	} {
		env := map[string]string{"ANTHROPIC_BASE_URL": tc.base}
		for _, n := range tc.set {
			env[n] = tc.value
		}
		cfg.Agent.Env = tc.listed
		r := Credentials(context.Background(), Env{Getenv: func(k string) string { return env[k] }}, cfg)
		check(t, r, tc.ok, tc.want)
		if tc.value != "" && strings.Contains(r.String(), tc.value) {
			t.Errorf("the value was printed: %s", r)
		}
	}
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nanoclaw.config.jsonc")
	cfg, r := Config(path)
	check(t, r, true, "does not exist, so every setting is the default")
	if cfg == nil || cfg.DataDir != filepath.Join(dir, "data") {
		t.Errorf("cfg %+v", cfg)
	}
	os.WriteFile(path, []byte("{\n  \"agent\": {\"maxConcurent\": 3},\n}\n"), 0o600)
	cfg, r = Config(path)
	check(t, r, false, "1 problem(s)")
	if cfg != nil || len(r.More) != 1 || !strings.HasPrefix(r.More[0], path+":2:13: ") {
		t.Errorf("problems: %q", r.More)
	}
}

func TestSQLiteAndMainGroup(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	db, r := SQLite(ctx, dataDir)
	check(t, r, true, "nanoclaw.db is writable (schema version")
	defer db.Close()
	// The probe was rolled back.
	var n int
	db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'doctor_probe'`).Scan(&n)
	if n != 0 {
		t.Error("probe table left behind")
	}
	cfg := &config.Config{File: "/etc/nc.jsonc", GroupsDir: t.TempDir()}
	check(t, MainGroup(ctx, db, cfg), false, "none registered")
	if err := groups.New(db, cfg.GroupsDir).Add(ctx, groups.Group{JID: "local:main", Name: "Main", Folder: "main", IsMain: true}); err != nil {
		t.Fatal(err)
	}
	// A main chat on a channel that is off gets no answer.
	check(t, MainGroup(ctx, db, cfg), false, "main (local:main) is a local chat, but that channel is off: set channels.local.enabled to true in /etc/nc.jsonc")
	cfg.Channels.Local.Enabled = true
	check(t, MainGroup(ctx, db, cfg), true, "main (local:main)")
	check(t, MainGroup(ctx, nil, cfg), false, "not checked")

	// A dataDir that cannot be a directory.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	db2, r := SQLite(ctx, file)
	check(t, r, false, "make "+file+" a writable directory")
	if db2 != nil {
		t.Error("db returned on failure")
	}
}

func TestWhatsApp(t *testing.T) {
	ctx := context.Background()
	cfg := &config.Config{DataDir: t.TempDir()}
	local := groups.Group{JID: "local:main", IsMain: true}
	check(t, WhatsApp(ctx, cfg, 0, nil), true, "disabled")
	cfg.Channels.WhatsApp.Enabled = true
	// No main chat yet: pairing is the first way to one, as setup offers.
	check(t, WhatsApp(ctx, cfg, 0, nil), false, "not paired: run 'nanoclawd whatsapp login'")
	check(t, WhatsApp(ctx, cfg, 0, []groups.Group{{JID: "120363@g.us", IsMain: true}}), false, "not paired: run 'nanoclawd whatsapp login'")
	// A group on WhatsApp needs it, wherever the main chat is.
	check(t, WhatsApp(ctx, cfg, 0, []groups.Group{local, {JID: "120363@g.us"}}), false, "not paired: run 'nanoclawd whatsapp login'")
	// Nothing registered is on WhatsApp: nothing to fix, a word to turn it off.
	for _, main := range []groups.Group{local, {JID: "tg:-100555", IsMain: true}} {
		r := WhatsApp(ctx, cfg, 0, []groups.Group{main, {JID: "tg:42"}})
		check(t, r, true, "not paired, and no registered chat is on WhatsApp")
		if !r.Warn {
			t.Errorf("an enabled WhatsApp nothing uses is not a WARN: %s", r)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "whatsapp.db")); err == nil {
		t.Error("the check created whatsapp.db")
	}
}

func TestDaemon(t *testing.T) {
	dataDir := t.TempDir()
	lock := filepath.Join(dataDir, "nanoclawd.lock")
	_, r := Daemon(dataDir)
	check(t, r, true, "not running")
	// A lock left by a daemon that has exited: its PID is dead.
	dead := exec.Command("true")
	dead.Run()
	os.WriteFile(lock, []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o600)
	pid, r := Daemon(dataDir)
	check(t, r, true, "not running")
	if pid != 0 {
		t.Errorf("pid %d", pid)
	}
	if _, known := flockHolder(lock); known {
		// The PID of a crashed daemon now names a live process (here:
		// this one), but nobody holds the lock.
		os.WriteFile(lock, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
		check(t, second(Daemon(dataDir)), true, "not running")
	}
	// Held the way the daemon holds it.
	f, err := os.OpenFile(lock, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(lock, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	pid, r = Daemon(dataDir)
	check(t, r, true, "running (PID "+strconv.Itoa(os.Getpid()))
	if pid != os.Getpid() {
		t.Errorf("pid %d", pid)
	}
}

func second(_ int, r Result) Result { return r }

func TestWhatsAppClientVersion(t *testing.T) {
	dir := t.TempDir()
	if got := clientVersion(dir); !strings.Contains(got, "none accepted yet") || !strings.Contains(got, whatsapp.BuiltinVersion().String()) {
		t.Errorf("no version file: %q", got)
	}
	os.WriteFile(layout.New(dir, "").WhatsAppVersion(), []byte("2.3000.1029999999\n"), 0o600)
	if got := clientVersion(dir); !strings.Contains(got, "client version 2.3000.1029999999") {
		t.Errorf("with a version file: %q", got)
	}
}
