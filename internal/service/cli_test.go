package service_test

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"howett.net/plist"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// The CLI test runs the built nanoclawd with HOME in a temp dir and fake
// systemctl/launchctl first on PATH, as an operator would type it.

func TestMain(m *testing.M) { e2e.Main(m) }

func TestServiceCLI(t *testing.T) {
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("the CLI test drives the systemd side; it runs on Linux")
	}
	home, work, bin := t.TempDir(), t.TempDir(), t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho \"systemctl $*\" >> \""+calls+"\"\n"+
		"case \"$*\" in *show*) printf 'ActiveState=active\\nSubState=running\\nMainPID=77\\nUnitFileState=enabled\\n';; esac\n"), 0o755)
	config := filepath.Join(work, "nanoclaw.config.jsonc")
	os.WriteFile(config, []byte(`{"agent": {"env": ["ANTHROPIC_API_KEY"]}}`), 0o600)
	env := []string{"HOME=" + home, "PATH=" + bin + ":/usr/bin:/bin", "ANTHROPIC_API_KEY=sk-never-written"}
	run := func(args ...string) (string, string, int) { return e2e.Run(t, work, env, args...) }
	unit := filepath.Join(home, ".config/systemd/user/nanoclawd.service")

	// --dry-run: the unit with absolute paths, the commands, nothing done.
	out, stderr, code := run("service", "install", "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"ExecStart=" + e2e.Nanoclawd(t) + " run --config " + config,
		"WorkingDirectory=" + work,
		"EnvironmentFile=-" + filepath.Join(work, "nanoclawd.env"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"systemctl --user enable --now nanoclawd.service", "agent.env names ANTHROPIC_API_KEY"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("dry run's notes lack %q:\n%s", want, stderr)
		}
	}
	if _, err := os.Stat(unit); err == nil {
		t.Error("dry run wrote the unit")
	}
	if _, err := os.Stat(calls); err == nil {
		t.Error("dry run ran systemctl")
	}
	if _, _, code := run("service", "status"); code != 3 {
		t.Errorf("status before install: exit %d, want 3", code)
	}

	if _, stderr, code := run("service", "install"); code != 0 {
		t.Fatalf("install: exit %d: %s", code, stderr)
	}
	body, err := os.ReadFile(unit)
	if err != nil || bytes.Contains(body, []byte("sk-never-written")) {
		t.Errorf("unit %v:\n%s", err, body)
	}
	if out, _, code := run("service", "status"); code != 0 || !strings.Contains(out, "pid: 77") {
		t.Errorf("status: exit %d\n%s", code, out)
	}
	if _, stderr, code := run("service", "uninstall"); code != 0 {
		t.Fatalf("uninstall: exit %d: %s", code, stderr)
	}
	got, _ := os.ReadFile(calls)
	want := "systemctl --user show-environment\nsystemctl --user daemon-reload\nsystemctl --user enable --now nanoclawd.service\n" +
		"systemctl --user show nanoclawd.service --property=ActiveState,SubState,MainPID,UnitFileState,ExecMainStatus\n" +
		"systemctl --user disable --now nanoclawd.service\nsystemctl --user daemon-reload\n"
	if string(got) != want {
		t.Errorf("systemctl calls:\n%s\nwant:\n%s", got, want)
	}

	// Bad input: one line, non-zero.
	_, stderr, code = run("service", "install", "--bogus")
	if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("bad flag: exit %d, %q", code, stderr)
	}
}

// --dry-run --for prints another platform's service file on any OS: alone
// on stdout, so a plist reader reads it whole; where it goes, the
// commands and the secrets' note on stderr. Without --for, this OS's.
func TestServiceDryRunFor(t *testing.T) {
	home, work := t.TempDir(), t.TempDir()
	config := filepath.Join(work, "nanoclaw.config.jsonc")
	os.WriteFile(config, []byte(`{"agent": {"env": ["ANTHROPIC_API_KEY"]}}`), 0o600)
	env := []string{"HOME=" + home, "PATH=/usr/bin:/bin", "ANTHROPIC_API_KEY=sk-never-written"}
	run := func(args ...string) (string, string, int) { return e2e.Run(t, work, env, args...) }
	bin := e2e.Nanoclawd(t)
	logs := filepath.Join(work, "data", "logs")

	for _, system := range []bool{false, true} {
		args := []string{"service", "install", "--dry-run", "--for", "macos"}
		label, file := "com.nanoclawd.agent", filepath.Join(home, "Library/LaunchAgents/com.nanoclawd.agent.plist")
		if system {
			args, label, file = append(args, "--system"), "com.nanoclawd.daemon", "/Library/LaunchDaemons/com.nanoclawd.daemon.plist"
		}
		out, stderr, code := run(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var d map[string]any
		if _, err := plist.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("%v: stdout is not a plist: %v\n%s", args, err, out)
		}
		argv, _ := d["ProgramArguments"].([]any)
		if d["Label"] != label || len(argv) != 4 || argv[0] != bin || argv[3] != config || d["StandardErrorPath"] != filepath.Join(logs, "stderr.log") ||
			d["WorkingDirectory"] != work {
			t.Errorf("%v: plist %#v", args, d)
		}
		if _, hasUser := d["UserName"]; hasUser != system {
			t.Errorf("%v: UserName %v", args, d["UserName"])
		}
		if strings.Contains(out, "sk-never-written") || strings.Contains(out, "ANTHROPIC_API_KEY") {
			t.Errorf("%v: the plist names the secret:\n%s", args, out)
		}
		for _, want := range []string{"# " + file + " (dry run: nothing written)", "launchctl bootstrap", "agent.env names ANTHROPIC_API_KEY: launchd"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr)
			}
		}
	}

	out, stderr, code := run("service", "install", "--dry-run", "--for", "linux")
	if code != 0 || !strings.HasPrefix(out, "# Written by 'nanoclawd service install'") || !strings.Contains(out, "\nExecStart="+bin+" run --config "+config+"\n") ||
		!strings.Contains(stderr, "systemctl --user enable --now nanoclawd.service") {
		t.Errorf("--for linux: exit %d\n%s\n%s", code, out, stderr)
	}
	// This OS's own file without --for.
	mine, _, _ := run("service", "install", "--dry-run")
	if runtime.GOOS == "darwin" != strings.HasPrefix(mine, "<?xml") {
		t.Errorf("service install --dry-run on %s printed:\n%s", runtime.GOOS, mine)
	}

	// Bad input: one line, non-zero, nothing written.
	other := map[string]string{"darwin": "linux", "linux": "macos"}[runtime.GOOS]
	for _, args := range [][]string{{"--dry-run", "--for", "windows"}, {"--for", other}, {"--system", "--for", "linux", "--dry-run"}} {
		_, stderr, code := run(append([]string{"service", "install"}, args...)...)
		if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("a dry run wrote into the home: %v", entries)
	}
}
