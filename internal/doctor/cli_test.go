package doctor_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/selftest"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// The CLI test runs the built nanoclawd: `doctor` on a temp install, with
// fake node, bwrap and socat first on PATH so the outcome does not depend
// on this machine.

func TestMain(m *testing.M) { e2e.Main(m) }

type install struct {
	t      *testing.T
	dir    string
	config string
	env    []string
}

func newInstall(t *testing.T) *install {
	dir := t.TempDir()
	// A root doctor starts bwrap as the runs' user, who must reach it.
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "fakebin")
	os.MkdirAll(bin, 0o755)
	for name, body := range map[string]string{"node": "echo v24.21.0", "bwrap": "exit 0", "socat": "exit 0"} {
		os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755)
	}
	in := &install{t: t, dir: dir, config: filepath.Join(dir, "nanoclaw.config.jsonc"),
		env: []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir}}
	// The agents' node by path: a bare "node" would be the bin/node beside the built nanoclawd.
	in.write(`{"channels": {"whatsapp": {"enabled": false}, "local": {"enabled": true}}, "agent": {"command": ["fakebin/node", "agent-runner/dist/index.js"], "env": ["ANTHROPIC_API_KEY"]}}`)
	return in
}

func (in *install) write(cfg string) {
	if err := os.WriteFile(in.config, []byte(cfg), 0o600); err != nil {
		in.t.Fatal(err)
	}
}

func (in *install) run(args ...string) (string, string, int) {
	in.t.Helper()
	return e2e.Run(in.t, "", in.env, append(args, "--config", in.config)...)
}

// lines is doctor's output by check: each result's lines (wrapped to fit
// 100 columns) joined into one.
func lines(out string) map[string]string {
	m := map[string]string{}
	check := ""
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, " ") && check != "":
			m[check] += " " + strings.TrimSpace(l)
		case len(l) > 5:
			check, _, _ = strings.Cut(l[5:], ":")
			m[check] = l
		}
	}
	return m
}

func expect(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for check, prefix := range want {
		if !strings.HasPrefix(got[check], prefix) {
			t.Errorf("%s: got %q, want it to start with %q", check, got[check], prefix)
		}
	}
}

func TestDoctorOnATempInstall(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux: it drives the Linux checks with a fake bwrap (the Mac's are TestSandbox's and mac_test.go's)")
	}
	in := newInstall(t)
	// Fresh: no runner built, no SDK, no main group, no key.
	out, stderr, code := in.run("doctor")
	if code != 1 || !strings.Contains(stderr, "5 check(s) need fixing") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	got := lines(out)
	if len(got) != 14 {
		t.Errorf("%d check lines, want 14:\n%s", len(got), out)
	}
	expect(t, got, map[string]string{
		"config":       "ok   config: " + in.config + " is valid",
		"sqlite":       "ok   sqlite: " + filepath.Join(in.dir, "data", "nanoclaw.db") + " is writable",
		"node":         "ok   node: " + filepath.Join(in.dir, "fakebin", "node") + " v24.21.0",
		"agent runner": "FIX  agent runner: " + filepath.Join(in.dir, "agent-runner", "dist", "index.js"),
		"agent sdk":    "FIX  agent sdk: @anthropic-ai/claude-agent-sdk is not installed",
		"sandbox":      "ok   sandbox: bwrap (a test sandbox",
		"confinement":  "ok   confinement: runs are uid ",
		// A fake bwrap starts nothing: nothing is proven.
		"security test": "FIX  security test: could not run, so the sandbox is not proven here",
		"whatsapp":      "ok   whatsapp: disabled",
		"telegram":      "ok   telegram: disabled",
		"main group":    "FIX  main group: none registered",
		"credentials":   "FIX  credentials: agent.env lists ANTHROPIC_API_KEY but it is not set",
		"model api":     "ok   model api: no refusal",
		"daemon":        "ok   daemon: not running",
	})

	// Provide each missing piece: every check passes but the security
	// test, which a fake bwrap cannot pass (TestDoctorRunsTheSecurityTest
	// runs the real one).
	index := filepath.Join(in.dir, "agent-runner", "dist", "index.js")
	pkg := filepath.Join(in.dir, "agent-runner", "node_modules", "@anthropic-ai", "claude-agent-sdk", "package.json")
	os.MkdirAll(filepath.Dir(index), 0o755)
	os.MkdirAll(filepath.Dir(pkg), 0o755)
	os.WriteFile(index, []byte("// built\n"), 0o644)
	os.WriteFile(pkg, []byte(`{"version": "0.3.330"}`), 0o644)
	if _, stderr, code := in.run("groups", "add", "--main", "--jid", "local:main", "--name", "Main", "--folder", "main"); code != 0 {
		t.Fatal(stderr)
	}
	// The model API accepts only this key.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-api-key") != "sk-test-not-printed" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"data":[]}`))
	}))
	defer api.Close()
	in.env = append(in.env, "ANTHROPIC_BASE_URL="+api.URL)
	noKey := slices.Clip(in.env)
	in.env = append(noKey, "ANTHROPIC_API_KEY=sk-test-not-printed")
	out, stderr, code = in.run("doctor")
	if code != 1 || strings.Count(out, "FIX") != 1 || !strings.Contains(out, "FIX  security test:") {
		t.Errorf("exit %d, stderr %q:\n%s", code, stderr, out)
	}
	if strings.Contains(out+stderr, "sk-test-not-printed") {
		t.Error("doctor printed the key")
	}
	expect(t, lines(out), map[string]string{
		"agent runner": "ok   agent runner: " + index,
		"agent sdk":    "ok   agent sdk: @anthropic-ai/claude-agent-sdk 0.3.330",
		"main group":   "ok   main group: main (local:main)",
		"credentials":  "ok   credentials: ANTHROPIC_API_KEY is set, passed to agents (agent.env) and accepted by the API",
	})

	// A dummy key in nanoclawd.env, as setup saves it: read, and refused.
	in.env = noKey
	os.WriteFile(filepath.Join(in.dir, "nanoclawd.env"), []byte("ANTHROPIC_API_KEY=sk-dummy\n"), 0o600)
	out, _, code = in.run("doctor")
	if code != 1 || strings.Contains(out, "sk-dummy") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	expect(t, lines(out), map[string]string{
		"credentials": "FIX  credentials: ANTHROPIC_API_KEY is set, but the API rejected it (401 Unauthorized",
	})
	os.Remove(filepath.Join(in.dir, "nanoclawd.env"))

	// WhatsApp on but never paired, with a group on it; the main chat's
	// local channel off; bwrap that cannot sandbox.
	in.write(`{"agent": {"env": ["ANTHROPIC_API_KEY"]}}`)
	if _, stderr, code := in.run("groups", "add", "--jid", "120363@g.us", "--name", "Family", "--folder", "family"); code != 0 {
		t.Fatal(stderr)
	}
	os.WriteFile(filepath.Join(in.dir, "fakebin", "bwrap"), []byte("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"), 0o755)
	out, _, code = in.run("doctor")
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	expect(t, lines(out), map[string]string{
		"whatsapp":      "FIX  whatsapp: not paired: run 'nanoclawd whatsapp login'",
		"main group":    "FIX  main group: main (local:main) is a local chat, but that channel is off: set channels.local.enabled to true in " + in.config,
		"sandbox":       "FIX  sandbox: bwrap is installed but cannot build an agent's sandbox (bwrap: No permissions to create new namespace)",
		"security test": "FIX  security test: not run until the sandbox check passes",
	})
}

// With this machine's real bubblewrap, doctor runs `security test`: every
// boundary holds, but those that wait for the kernel branch.
func TestDoctorRunsTheSecurityTest(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil && runtime.GOOS == "linux" {
		t.Skip("no bwrap here")
	}
	in := newInstall(t)
	in.env = append(os.Environ(), "HOME="+in.dir)
	out, _, _ := in.run("doctor")
	line := lines(out)["security test"]
	switch {
	case strings.HasPrefix(line, "ok   security test: every boundary holds on this machine ("+strings.Join(selftest.Boundaries, ", ")+")"):
	default:
		t.Errorf("security test: %q\n%s", line, out)
	}
}

func TestDoctorInvalidConfig(t *testing.T) {
	in := newInstall(t)
	in.write("{\n  \"agent\": {\"maxConcurrent\": 99},\n  \"dataDirr\": \"x\",\n}\n")
	out, _, code := in.run("doctor")
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	for _, want := range []string{
		"FIX  config: " + in.config + " has 2 problem(s)",
		"     " + in.config + ":2:",
		"     " + in.config + ":3:3: unknown key \"dataDirr\"",
		"FIX  sqlite: not checked until the config is valid",
		"ok   node: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// With the real daemon running, doctor names its PID.
func TestDoctorSeesRunningDaemon(t *testing.T) {
	in := newInstall(t)
	// The same config file, now with the local channel, and the daemon
	// runs with the fake PATH and HOME.
	d := e2e.New(t, e2e.Options{Dir: in.dir, Agent: `"env": ["ANTHROPIC_API_KEY"]`})
	d.Env = in.env
	p := d.Start()
	// The daemon writes its PID into the lock once it holds it.
	want := strconv.Itoa(p.Cmd.Process.Pid)
	lock := filepath.Join(in.dir, "data", "nanoclawd.lock")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(lock); strings.TrimSpace(string(b)) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon never took the lock")
		}
	}
	out, _, _ := in.run("doctor")
	expect(t, lines(out), map[string]string{"daemon": "ok   daemon: running (PID " + want + ","})
}
