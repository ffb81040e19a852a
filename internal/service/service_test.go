package service

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// awkward has every character the two formats must escape.
var awkward = Spec{
	Binary:  "/Users/a&b/<bin> $dir/nanoclawd",
	Config:  `/Users/a&b/my "claw" 100%/$conf/nanoclaw.config.jsonc`,
	WorkDir: `/Users/a&b/my "claw" 100%`,
	LogDir:  "/Users/a&b/data $HOME/logs",
	Path:    DefaultPath("/Users/a&b/.nvm/versions/node/v20.1.0/bin"),
	Home:    "/Users/a&b",
	EnvFile: `/Users/a&b/my "claw" 100%/nanoclawd.env`,
}

var plain = Spec{
	Binary:  "/home/owner/nanoclawd/bin/nanoclawd",
	Config:  "/home/owner/nanoclawd/nanoclaw.config.jsonc",
	WorkDir: "/home/owner/nanoclawd",
	LogDir:  "/home/owner/nanoclawd/data/logs",
	Path:    DefaultPath("/usr/bin"),
	Home:    "/home/owner",
	EnvFile: "/home/owner/nanoclawd/nanoclawd.env",
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update once)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n%s", name, got)
	}
}

func TestGolden(t *testing.T) {
	for name, s := range map[string]Spec{"plain": plain, "awkward": awkward} {
		p, err := Plist(s)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, name+".plist", p)
		u, err := SystemdUnit(s)
		if err != nil {
			t.Fatal(err)
		}
		golden(t, name+".service", u)
	}
}

// The plist is well-formed XML whose strings read back as the paths given,
// whatever characters they hold.
func TestPlistRoundTrip(t *testing.T) {
	p, err := Plist(awkward)
	if err != nil {
		t.Fatal(err)
	}
	var strs []string
	dec := xml.NewDecoder(bytes.NewReader(p))
	dec.Strict = true
	inString := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inString = tok.Name.Local == "string"
		case xml.CharData:
			if inString {
				strs = append(strs, string(tok))
			}
		case xml.EndElement:
			inString = false
		}
	}
	joined := strings.Join(strs, "\n")
	for _, want := range []string{awkward.Binary, awkward.Config, awkward.WorkDir, awkward.Home, filepath.Join(awkward.LogDir, "stderr.log")} {
		if !strings.Contains("\n"+joined+"\n", "\n"+want+"\n") {
			t.Errorf("%q not read back; strings: %q", want, strs)
		}
	}
}

// systemd would read "%h" or "$HOME" in a path as a specifier or variable.
func TestSystemdEscapes(t *testing.T) {
	u, _ := SystemdUnit(awkward)
	s := string(u)
	for _, want := range []string{
		`ExecStart="/Users/a&b/<bin> $dir/nanoclawd" run --config "/Users/a&b/my \"claw\" 100%%/$$conf/nanoclaw.config.jsonc"`,
		`WorkingDirectory=/Users/a&b/my "claw" 100%%` + "\n",
		`EnvironmentFile=-/Users/a&b/my "claw" 100%%/nanoclawd.env`,
		`Environment="PATH=/Users/a&b/.nvm/versions/node/v20.1.0/bin:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin"`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("unit lacks %s:\n%s", want, s)
		}
	}
}

func TestSpecRejectsBadPaths(t *testing.T) {
	for name, mod := range map[string]func(*Spec){
		"relative binary": func(s *Spec) { s.Binary = "bin/nanoclawd" },
		"newline config":  func(s *Spec) { s.Config = "/a\nExecStartPre=/bin/evil" },
		"colon in PATH":   func(s *Spec) { s.Path = []string{"/a:/b"} },
	} {
		s := plain
		mod(&s)
		if _, err := SystemdUnit(s); err == nil {
			t.Errorf("%s: unit accepted", name)
		}
		if _, err := Plist(s); err == nil {
			t.Errorf("%s: plist accepted", name)
		}
	}
}

func TestDefaultPath(t *testing.T) {
	if got := strings.Join(DefaultPath("/opt/node/bin"), ":"); got != "/opt/node/bin:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin" {
		t.Errorf("got %s", got)
	}
	if got := strings.Join(DefaultPath("/usr/local/bin"), ":"); got != "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin" {
		t.Errorf("node in a usual place listed twice: %s", got)
	}
}

// fakeTools puts fake launchctl and systemctl first in PATH; each records
// its arguments in the returned log, answers print/show like a running
// service, and fails (like systemd without a user bus) when its arguments
// contain $FAKE_FAIL.
func fakeTools(t *testing.T) (log string) {
	t.Helper()
	bin := t.TempDir()
	log = filepath.Join(t.TempDir(), "calls")
	script := `#!/bin/sh
echo "$(basename "$0") $*" >> "$FAKE_LOG"
if [ -n "$FAKE_FAIL" ]; then
  case "$*" in *"$FAKE_FAIL"*) echo "Failed to connect to bus: No medium found" >&2; echo "second line" >&2; exit 1;; esac
fi
case "$*" in
  *" show "*) printf 'ActiveState=%s\nSubState=running\nMainPID=4242\nUnitFileState=enabled\nExecMainStatus=0\n' "${FAKE_STATE:-active}" ;;
  "print "*) printf 'gui/501/com.nanoclawd.agent = {\n\tstate = %s\n\tpid = 4242\n\tlast exit code = (never exited)\n}\n' "${FAKE_STATE:-running}" ;;
esac
exit 0
`
	for _, name := range []string{"launchctl", "systemctl"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("FAKE_LOG", log)
	return log
}

func calls(t *testing.T, log string) string {
	b, err := os.ReadFile(log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

func specIn(home string) Spec {
	s := plain
	s.LogDir = filepath.Join(home, "data", "logs")
	s.Home = home
	return s
}

func TestSystemdLifecycle(t *testing.T) {
	log := fakeTools(t)
	home := t.TempDir()
	var out bytes.Buffer
	m := &Manager{GOOS: "linux", Home: home, UID: 1000, Out: &out}
	ctx := context.Background()
	if err := m.Status(ctx); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("status before install: %v", err)
	}

	if err := m.Install(ctx, specIn(home), []string{"ANTHROPIC_API_KEY"}, true); err != nil {
		t.Fatal(err)
	}
	if c := calls(t, log); c != "" {
		t.Errorf("dry run ran %q", c)
	}
	if _, err := os.Stat(m.File()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dry run wrote %s", m.File())
	}
	for _, want := range []string{"ExecStart=/home/owner/nanoclawd/bin/nanoclawd run --config", "systemctl --user enable --now nanoclawd.service", "ANTHROPIC_API_KEY", EnvFileName} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out.String())
		}
	}

	// Without a user session, nothing is written and the error says what to do.
	t.Setenv("FAKE_FAIL", "show-environment")
	if err := m.Install(ctx, specIn(home), nil, false); err == nil || !strings.Contains(err.Error(), "loginctl enable-linger") ||
		!strings.Contains(err.Error(), "nothing was installed") {
		t.Errorf("install without a user session: %v", err)
	}
	if _, err := os.Stat(m.File()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("install without a user session wrote %s", m.File())
	}
	t.Setenv("FAKE_FAIL", "")
	os.Remove(log)

	if err := m.Install(ctx, specIn(home), nil, false); err != nil {
		t.Fatal(err)
	}
	want, _ := SystemdUnit(specIn(home))
	if got, err := os.ReadFile(filepath.Join(home, ".config/systemd/user/nanoclawd.service")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("unit file: %v\n%s", err, got)
	}
	if c := calls(t, log); c != "systemctl --user show-environment\nsystemctl --user daemon-reload\nsystemctl --user enable --now nanoclawd.service\n" {
		t.Errorf("install ran:\n%s", c)
	}
	if _, err := os.Stat(filepath.Join(home, "data", "logs")); err != nil {
		t.Errorf("log directory not created: %v", err)
	}
	// Installing again picks up the new unit in the running service.
	os.Remove(log)
	if err := m.Install(ctx, specIn(home), nil, false); err != nil {
		t.Fatal(err)
	}
	if c := calls(t, log); !strings.HasSuffix(c, "systemctl --user restart nanoclawd.service\n") {
		t.Errorf("reinstall ran:\n%s", c)
	}

	out.Reset()
	if err := m.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "state: active (running), enabled at login") || !strings.Contains(out.String(), "pid: 4242") {
		t.Errorf("status:\n%s", out.String())
	}
	t.Setenv("FAKE_STATE", "failed")
	if err := m.Status(ctx); !errors.Is(err, ErrNotRunning) {
		t.Errorf("status of a failed unit: %v", err)
	}

	os.Remove(log)
	if err := m.Uninstall(ctx); err != nil {
		t.Fatal(err)
	}
	if c := calls(t, log); c != "systemctl --user disable --now nanoclawd.service\nsystemctl --user daemon-reload\n" {
		t.Errorf("uninstall ran:\n%s", c)
	}
	if _, err := os.Stat(m.File()); !errors.Is(err, os.ErrNotExist) {
		t.Error("unit file left behind")
	}
	out.Reset()
	if err := m.Uninstall(ctx); err != nil || !strings.Contains(out.String(), "nothing to uninstall") {
		t.Errorf("second uninstall: %v %q", err, out.String())
	}
}

func TestLaunchdLifecycle(t *testing.T) {
	log := fakeTools(t)
	home := t.TempDir()
	var out bytes.Buffer
	m := &Manager{GOOS: "darwin", Home: home, UID: 501, Out: &out}
	ctx := context.Background()
	plist := filepath.Join(home, "Library/LaunchAgents/com.nanoclawd.agent.plist")

	if err := m.Install(ctx, specIn(home), []string{"ANTHROPIC_API_KEY"}, false); err != nil {
		t.Fatal(err)
	}
	if c := calls(t, log); c != "launchctl bootstrap gui/501 "+plist+"\n" {
		t.Errorf("install ran:\n%s", c)
	}
	body, _ := os.ReadFile(plist)
	if bytes.Contains(body, []byte("ANTHROPIC_API_KEY")) {
		t.Error("plist names a secret")
	}
	if !strings.Contains(out.String(), "agent.env names ANTHROPIC_API_KEY: launchd does not read your shell profile") || !strings.Contains(out.String(), "nanoclawd.env (one NAME=value a line, chmod 600") {
		t.Errorf("no word on how to pass the key:\n%s", out.String())
	}
	// Reinstall: the loaded job is booted out first; a bootout failure
	// (job not loaded) does not stop the install.
	os.Remove(log)
	t.Setenv("FAKE_FAIL", "bootout")
	if err := m.Install(ctx, specIn(home), nil, false); err != nil {
		t.Fatal(err)
	}
	if c := calls(t, log); c != "launchctl bootout gui/501/com.nanoclawd.agent\nlaunchctl bootstrap gui/501 "+plist+"\n" {
		t.Errorf("reinstall ran:\n%s", c)
	}
	t.Setenv("FAKE_FAIL", "")

	out.Reset()
	if err := m.Status(ctx); err != nil || !strings.Contains(out.String(), "state: running") {
		t.Errorf("status: %v\n%s", err, out.String())
	}
	os.Remove(log)
	if err := m.Uninstall(ctx); err != nil {
		t.Fatal(err)
	}
	if c := calls(t, log); c != "launchctl bootout gui/501/com.nanoclawd.agent\n" {
		t.Errorf("uninstall ran:\n%s", c)
	}
	if _, err := os.Stat(plist); !errors.Is(err, os.ErrNotExist) {
		t.Error("plist left behind")
	}
}

// A service manager that fails gives one line: what ran and what it said.
func TestInstallFailureIsOneLine(t *testing.T) {
	fakeTools(t)
	t.Setenv("FAKE_FAIL", "daemon-reload")
	home := t.TempDir()
	m := &Manager{GOOS: "linux", Home: home, Out: &bytes.Buffer{}}
	err := m.Install(context.Background(), specIn(home), nil, false)
	if err == nil {
		t.Fatal("install succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "systemctl --user daemon-reload failed: Failed to connect to bus") {
		t.Errorf("error: %q", msg)
	}
}

// systemd itself reads the unit back: the program at an awkward path is
// found (so quoting and escaping are right), and no directive is unknown.
func TestSystemdAnalyzeAcceptsUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	bin := filepath.Join(t.TempDir(), `a&b <c> 100% $x`)
	dir := filepath.Join(t.TempDir(), `a&b "q" 'r' 100% $x`)
	os.MkdirAll(bin, 0o755)
	os.MkdirAll(dir, 0o755)
	s := plain
	s.Binary, s.Config, s.WorkDir, s.EnvFile = filepath.Join(bin, "nanoclawd"), filepath.Join(dir, "nanoclaw.config.jsonc"), dir, filepath.Join(dir, EnvFileName)
	os.WriteFile(s.Binary, []byte("#!/bin/sh\n"), 0o755)
	unit, _ := SystemdUnit(s)
	file := filepath.Join(t.TempDir(), Unit)
	os.WriteFile(file, unit, 0o644)
	out, err := exec.Command(analyze, "verify", file).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s\n%s", err, out, unit)
	}
}

// systemd refuses such a program path outright; launchd does not care.
func TestSystemdRefusesQuotedProgram(t *testing.T) {
	s := plain
	s.Binary = `/home/o'neil/bin/nanoclawd`
	if _, err := SystemdUnit(s); err == nil || !strings.Contains(err.Error(), "move nanoclawd to a plain path") {
		t.Errorf("unit: %v", err)
	}
	if _, err := Plist(s); err != nil {
		t.Errorf("plist: %v", err)
	}
}

// An independent plist reader (Python's plistlib, when installed) reads the
// file back to the same values.
func TestPlistReadByPlistlib(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	p, _ := Plist(awkward)
	cmd := exec.Command(python, "-c", `import json, plistlib, sys; print(json.dumps(plistlib.loads(sys.stdin.buffer.read())))`)
	cmd.Stdin = bytes.NewReader(p)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("plistlib: %v", err)
	}
	var got struct {
		Label                string
		ProgramArguments     []string
		WorkingDirectory     string
		KeepAlive            map[string]bool
		ThrottleInterval     int
		EnvironmentVariables map[string]string
		StandardErrorPath    string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{awkward.Binary, "run", "--config", awkward.Config}
	if got.Label != Label || !slices.Equal(got.ProgramArguments, want) || got.WorkingDirectory != awkward.WorkDir ||
		got.KeepAlive["SuccessfulExit"] != false || len(got.KeepAlive) != 1 || got.ThrottleInterval != throttle ||
		got.EnvironmentVariables["HOME"] != awkward.Home || got.EnvironmentVariables["PATH"] != strings.Join(awkward.Path, ":") ||
		got.StandardErrorPath != filepath.Join(awkward.LogDir, "stderr.log") || len(got.EnvironmentVariables) != 2 {
		t.Errorf("read back %+v", got)
	}
}
