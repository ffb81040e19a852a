package service_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		"systemctl --user enable --now nanoclawd.service",
		"agent.env names ANTHROPIC_API_KEY",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
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
