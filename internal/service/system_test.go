package service

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The LaunchDaemon's plist: the LaunchAgent's with its own label and the
// owner's account in UserName (golden file).
func TestSystemPlistGolden(t *testing.T) {
	s := plain
	s.User = "owner"
	p, err := Plist(s)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "system.plist", p)
	if python, err := exec.LookPath("python3"); err == nil {
		// An independent reader sees the label and the account.
		cmd := exec.Command(python, "-c", `import plistlib, sys; d = plistlib.loads(sys.stdin.buffer.read()); print(d["Label"], d["UserName"], d["ProgramArguments"][1])`)
		cmd.Stdin = bytes.NewReader(p)
		out, err := cmd.Output()
		if err != nil || string(out) != "com.nanoclawd.daemon owner run\n" {
			t.Errorf("plistlib read %q (%v)", out, err)
		}
	}
	s.User = "bad name"
	if _, err := Plist(s); err == nil {
		t.Error("a user name with a space was accepted")
	}
}

// service install --system writes the LaunchDaemon, boots it in the
// system domain, and takes the LaunchAgent down: both would compete for
// the daemon's lock. Uninstall removes it again.
func TestLaunchDaemonLifecycle(t *testing.T) {
	log := fakeTools(t)
	home, root := t.TempDir(), t.TempDir()
	agent := filepath.Join(home, "Library/LaunchAgents/com.nanoclawd.agent.plist")
	if err := os.MkdirAll(filepath.Dir(agent), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(agent, []byte("<plist/>"), 0o644)
	var out bytes.Buffer
	m := &Manager{GOOS: "darwin", Home: home, UID: 501, Out: &out, System: true, Root: root}
	s := specIn(home)
	s.User = "owner"
	ctx := context.Background()
	if err := m.Install(ctx, s, nil, false); err != nil {
		t.Fatal(err)
	}
	daemon := filepath.Join(root, "Library/LaunchDaemons/com.nanoclawd.daemon.plist")
	if c := calls(t, log); c != "launchctl bootout gui/501/com.nanoclawd.agent\nlaunchctl bootstrap system "+daemon+"\n" {
		t.Errorf("install ran:\n%s", c)
	}
	body, err := os.ReadFile(daemon)
	if err != nil || !bytes.Contains(body, []byte("<key>UserName</key>\n\t<string>owner</string>")) {
		t.Errorf("LaunchDaemon %s: %v\n%s", daemon, err, body)
	}
	if _, err := os.Stat(agent); !errors.Is(err, os.ErrNotExist) {
		t.Error("the LaunchAgent was left beside the LaunchDaemon")
	}
	if !strings.Contains(out.String(), "at every boot, as owner, without anyone logging in") {
		t.Errorf("install said:\n%s", out.String())
	}
	os.Remove(log)
	if err := m.Uninstall(ctx); err != nil {
		t.Fatal(err)
	}
	if c := calls(t, log); c != "launchctl bootout system/com.nanoclawd.daemon\n" {
		t.Errorf("uninstall ran:\n%s", c)
	}
}

func TestSystemOnLinuxRefused(t *testing.T) {
	m := &Manager{GOOS: "linux", Home: t.TempDir(), Out: &bytes.Buffer{}, System: true}
	s := plain
	s.User = "owner"
	if err := m.Install(context.Background(), s, nil, true); !errors.Is(err, ErrSystemNotMac) || !strings.Contains(err.Error(), "enable-linger") {
		t.Errorf("Install --system on Linux = %v", err)
	}
}
