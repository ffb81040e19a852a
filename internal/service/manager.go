package service

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
)

var (
	// ErrNotInstalled: there is no service file.
	ErrNotInstalled = errors.New("the nanoclawd service is not installed: run 'nanoclawd service install'")
	// ErrNotRunning: the service is installed but its daemon does not run.
	ErrNotRunning = errors.New("the nanoclawd service is installed but not running")
)

// Manager installs, removes and inspects the service of one user. It runs
// launchctl or systemctl as found on PATH.
type Manager struct {
	GOOS string // "darwin" for launchd; anything else means systemd
	Home string // the owner's home
	UID  int    // the owner's uid
	Out  io.Writer
	// Notes, when set, takes what a dry run says besides the file (where
	// it goes, the commands, how to give it secrets), so that Out holds
	// the file alone: `service install --dry-run > x.plist`.
	Notes io.Writer
	// System manages the LaunchDaemon (macOS only): it starts at boot,
	// without a login, as the owner (Spec.User). Installing it needs root.
	System bool
	// Root is where /Library is (tests point it elsewhere); "" = "/".
	Root string
}

// ErrSystemNotMac: --system is a launchd LaunchDaemon.
var ErrSystemNotMac = errors.New("--system installs a macOS LaunchDaemon; on Linux the user unit starts at boot once you run 'loginctl enable-linger " + userName() + "' as root")

func (m *Manager) launchd() bool { return m.GOOS == "darwin" }

// File is where the service file lives.
func (m *Manager) File() string {
	switch {
	case m.launchd() && m.System:
		return filepath.Join(cmpOr(m.Root, "/"), "Library", "LaunchDaemons", SystemLabel+".plist")
	case m.launchd():
		return m.agentFile()
	}
	return filepath.Join(m.Home, ".config", "systemd", "user", Unit)
}

func (m *Manager) agentFile() string {
	return filepath.Join(m.Home, "Library", "LaunchAgents", Label+".plist")
}

func (m *Manager) domain() string {
	if m.System {
		return "system"
	}
	return fmt.Sprintf("gui/%d", m.UID)
}

func (m *Manager) service() string {
	if m.System {
		return m.domain() + "/" + SystemLabel
	}
	return m.domain() + "/" + Label
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Install writes the service file for s and starts the service; with
// dryRun it only prints the file and the commands. secrets are the names
// in agent.env: they are never written, only named with how to provide
// them.
func (m *Manager) Install(ctx context.Context, s Spec, secrets []string, dryRun bool) error {
	if m.System && !m.launchd() {
		return ErrSystemNotMac
	}
	if m.System && s.User == "" {
		return errors.New("service install --system: no user to run the daemon as")
	}
	gen, tool := SystemdUnit, "systemctl"
	if m.launchd() {
		gen, tool = Plist, "launchctl"
	}
	body, err := gen(s)
	if err != nil {
		return fmt.Errorf("service file: %w", err)
	}
	file := m.File()
	_, statErr := os.Stat(file)
	existed := statErr == nil
	var cmds [][]string
	if m.launchd() {
		if existed {
			cmds = append(cmds, []string{"launchctl", "bootout", m.service()})
		}
		cmds = append(cmds, []string{"launchctl", "bootstrap", m.domain(), file})
		if _, err := os.Stat(m.agentFile()); err == nil && m.System {
			// Two daemons on one dataDir: the second would fail its lock and
			// be restarted every few seconds. The LaunchDaemon replaces it.
			agent := fmt.Sprintf("gui/%d/%s", m.UID, Label)
			cmds = append([][]string{{"launchctl", "bootout", agent}, {"rm", m.agentFile()}}, cmds...)
		}
	} else {
		cmds = append(cmds, []string{"systemctl", "--user", "daemon-reload"}, []string{"systemctl", "--user", "enable", "--now", Unit})
		if existed {
			cmds = append(cmds, []string{"systemctl", "--user", "restart", Unit})
		}
	}
	if dryRun {
		notes := m.Out
		if m.Notes != nil {
			notes = m.Notes
		}
		fmt.Fprintf(notes, "# %s (dry run: nothing written)\n", file)
		m.Out.Write(body)
		fmt.Fprintln(notes, "# then it would run:")
		for _, c := range cmds {
			fmt.Fprintln(notes, strings.Join(c, " "))
		}
		m.secretsNote(notes, s, secrets)
		return nil
	}
	if _, err := exec.LookPath(tool); err != nil {
		return fmt.Errorf("%s not found on PATH: install needs it to start the service (this system may not run a user %s)", tool, map[bool]string{true: "launchd", false: "systemd"}[m.launchd()])
	}
	if !m.launchd() {
		// Without a user session (ssh without linger, su, a container)
		// systemctl --user cannot reach its manager: say so before
		// writing a unit nothing would start.
		if _, err := m.run(ctx, "systemctl", "--user", "show-environment"); err != nil {
			if !strings.Contains(err.Error(), "enable-linger") {
				err = fmt.Errorf("%w (no systemd user session: log in on the machine, or run 'loginctl enable-linger %s' as root; or start 'nanoclawd run' yourself)", err, userName())
			}
			return fmt.Errorf("systemctl --user does not work here, so nothing was installed: %w; then run 'nanoclawd service install' again", err)
		}
	}
	if err := os.MkdirAll(s.LogDir, 0o700); err != nil {
		return fmt.Errorf("create log directory: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(file), err)
	}
	if err := atomicfile.Write(file, body, 0o644); err != nil {
		return err
	}
	for _, c := range cmds {
		if c[0] == "rm" {
			if err := os.Remove(c[1]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the LaunchAgent the LaunchDaemon replaces: %w", err)
			}
			fmt.Fprintf(m.Out, "removed the LaunchAgent %s: the LaunchDaemon replaces it\n", c[1])
			continue
		}
		if _, err := m.run(ctx, c...); err != nil {
			if c[1] == "bootout" {
				continue // bootout of a service that was not loaded
			}
			return fmt.Errorf("wrote %s, but %w", file, err)
		}
	}
	fmt.Fprintf(m.Out, "installed %s\n", file)
	if m.System {
		fmt.Fprintf(m.Out, "launchd runs nanoclawd now and at every boot, as %s, without anyone logging in; it restarts it after a crash, not after a clean exit\nlogs: %s and %s\n", s.User, filepath.Join(s.LogDir, "nanoclawd.log"), filepath.Join(s.LogDir, "stderr.log"))
	} else if m.launchd() {
		fmt.Fprintf(m.Out, "launchd runs nanoclawd now and at every login; it restarts it after a crash, not after a clean exit\nlogs: %s and %s\n", filepath.Join(s.LogDir, "nanoclawd.log"), filepath.Join(s.LogDir, "stderr.log"))
	} else {
		fmt.Fprintf(m.Out, "systemd runs nanoclawd now and at every login; it restarts it after a crash, not after a clean exit\nlogs: %s and journalctl --user -u %s\nto keep it running while you are logged out: loginctl enable-linger %s\n", filepath.Join(s.LogDir, "nanoclawd.log"), Unit, userName())
	}
	m.secretsNote(m.Out, s, secrets)
	return nil
}

// secretsNote says how to give the service the variables agent.env names:
// the service manager starts the daemon without the shell's environment,
// and `nanoclawd run` reads them from the env file beside the config.
func (m *Manager) secretsNote(w io.Writer, s Spec, secrets []string) {
	if len(secrets) == 0 {
		return
	}
	restart := "systemctl --user restart " + Unit
	manager := "systemd"
	if m.launchd() {
		restart, manager = "launchctl kickstart -k "+m.service(), "launchd"
	}
	fmt.Fprintf(w, "agent.env names %s: %s does not read your shell profile and the service file holds no secrets, so put them in %s (one NAME=value a line, chmod 600; nanoclawd reads it at start), then run: %s\n",
		strings.Join(secrets, ", "), manager, s.EnvFile, restart)
}

// Uninstall stops the service and removes its file. Nothing installed is
// not an error.
func (m *Manager) Uninstall(ctx context.Context) error {
	if m.System && !m.launchd() {
		return ErrSystemNotMac
	}
	file := m.File()
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(m.Out, "nothing to uninstall: %s does not exist\n", file)
		return nil
	}
	if m.launchd() {
		// Fails when the service is not loaded, which is what we want anyway.
		m.run(ctx, "launchctl", "bootout", m.service())
	} else {
		m.run(ctx, "systemctl", "--user", "disable", "--now", Unit)
	}
	if err := os.Remove(file); err != nil {
		return fmt.Errorf("remove service file: %w", err)
	}
	if !m.launchd() {
		if _, err := m.run(ctx, "systemctl", "--user", "daemon-reload"); err != nil {
			return fmt.Errorf("removed %s, but %w", file, err)
		}
	}
	fmt.Fprintf(m.Out, "stopped nanoclawd and removed %s (config, data and logs are kept)\n", file)
	return nil
}

// Status prints whether the service is installed and what the service
// manager says about it. It returns ErrNotInstalled or ErrNotRunning when
// the daemon is not running as a service.
func (m *Manager) Status(ctx context.Context) error {
	file := m.File()
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return ErrNotInstalled
	}
	fmt.Fprintf(m.Out, "installed: %s\n", file)
	if m.launchd() {
		out, err := m.run(ctx, "launchctl", "print", m.service())
		if err != nil {
			fmt.Fprintf(m.Out, "state: not loaded (launchctl bootstrap %s %s)\n", m.domain(), file)
			return ErrNotRunning
		}
		kv := fields(out, " = ")
		fmt.Fprintf(m.Out, "state: %s\n", orDash(kv["state"]))
		if kv["pid"] != "" {
			fmt.Fprintf(m.Out, "pid: %s\n", kv["pid"])
		}
		if kv["last exit code"] != "" {
			fmt.Fprintf(m.Out, "last exit: %s\n", kv["last exit code"])
		}
		if kv["state"] != "running" {
			return ErrNotRunning
		}
		return nil
	}
	out, err := m.run(ctx, "systemctl", "--user", "show", Unit, "--property=ActiveState,SubState,MainPID,UnitFileState,ExecMainStatus")
	if err != nil {
		return err
	}
	kv := fields(out, "=")
	fmt.Fprintf(m.Out, "state: %s (%s), %s at login\n", orDash(kv["ActiveState"]), orDash(kv["SubState"]), orDash(kv["UnitFileState"]))
	if pid := kv["MainPID"]; pid != "" && pid != "0" {
		fmt.Fprintf(m.Out, "pid: %s\n", pid)
	}
	if kv["ActiveState"] != "active" {
		fmt.Fprintf(m.Out, "last exit: %s (see journalctl --user -u %s)\n", orDash(kv["ExecMainStatus"]), Unit)
		return ErrNotRunning
	}
	return nil
}

// run runs a service manager command; a failure is one line with what it said.
func (m *Manager) run(ctx context.Context, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		said := strings.TrimSpace(string(out))
		if i := strings.IndexByte(said, '\n'); i >= 0 {
			said = said[:i]
		}
		if said == "" {
			said = err.Error()
		}
		if strings.Contains(said, "Failed to connect to bus") {
			said += " (no systemd user session: log in on the machine, or run 'loginctl enable-linger " + userName() + "' as root; or start 'nanoclawd run' yourself)"
		}
		return out, fmt.Errorf("%s failed: %s", strings.Join(args, " "), said)
	}
	return out, nil
}

// fields reads "key<sep>value" lines (trimmed), the first of each key.
func fields(out []byte, sep string) map[string]string {
	kv := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), sep)
		if _, seen := kv[k]; ok && !seen {
			kv[k] = strings.TrimSpace(v)
		}
	}
	return kv
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func userName() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "$USER"
}
