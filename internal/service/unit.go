// Package service installs nanoclawd as a per-user service: a launchd
// LaunchAgent on macOS, a systemd user unit on Linux. Generating the files
// is pure (Plist, SystemdUnit); Manager writes them and drives launchctl or
// systemctl, which it finds on PATH.
package service

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// Label is the launchd label of the LaunchAgent, SystemLabel that of the
// LaunchDaemon (service install --system), and Unit the systemd unit name.
const (
	Label       = "com.nanoclawd.agent"
	SystemLabel = "com.nanoclawd.daemon"
	Unit        = "nanoclawd.service"
)

// EnvFileName is the file next to the config that systemd reads secrets
// from (EnvironmentFile=); it is never written by nanoclawd.
const EnvFileName = layout.EnvFile

// throttle is the minimum time between restarts, in seconds: long enough
// not to spin on a crash at start, short enough to come back quickly.
const throttle = 10

// Spec is everything a service file says. Every path is absolute.
type Spec struct {
	Binary  string   // the nanoclawd executable
	Config  string   // the config file
	WorkDir string   // the config's directory
	LogDir  string   // <dataDir>/logs: launchd's stdout/stderr files
	Path    []string // PATH for the daemon (launchd and systemd read no shell profile)
	Home    string
	EnvFile string // systemd's optional EnvironmentFile
	// User, for a LaunchDaemon, is the owner's account it runs as (launchd
	// starts it at boot, before anyone logs in); "" for a LaunchAgent.
	User string
}

// DefaultPath is PATH for the daemon: the directory node is in now (if
// found), then the usual places Homebrew and the system put programs.
func DefaultPath(nodeDir string) []string {
	dirs := []string{"/opt/homebrew/bin", "/usr/local/bin", "/usr/bin", "/bin"}
	if nodeDir != "" && !slices.Contains(dirs, nodeDir) {
		dirs = append([]string{nodeDir}, dirs...)
	}
	return dirs
}

// NewSpec builds the Spec for binary serving the config at configFile with
// the given dataDir; node is looked up on the current PATH.
func NewSpec(binary, configFile, dataDir, home string) Spec {
	nodeDir := ""
	if p, err := exec.LookPath("node"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			nodeDir = filepath.Dir(abs)
		}
	}
	dir := filepath.Dir(configFile)
	return Spec{
		Binary: binary, Config: configFile, WorkDir: dir,
		LogDir: layout.New(dataDir, "").Logs(), Path: DefaultPath(nodeDir), Home: home,
		EnvFile: filepath.Join(dir, EnvFileName),
	}
}

func (s Spec) check() error {
	for name, p := range map[string]string{"binary": s.Binary, "config": s.Config, "working directory": s.WorkDir, "log directory": s.LogDir, "home": s.Home} {
		if !filepath.IsAbs(p) {
			return fmt.Errorf("%s path %q is not absolute", name, p)
		}
		if strings.ContainsAny(p, "\n\r\x00") {
			return fmt.Errorf("%s path %q contains a line break or NUL; move it to a plain path", name, p)
		}
	}
	if strings.ContainsAny(s.User, " \n\r\x00/:") {
		return fmt.Errorf("user name %q is not an account name", s.User)
	}
	for _, d := range s.Path {
		if strings.ContainsAny(d, ":\n\r\x00") {
			return fmt.Errorf("PATH entry %q contains ':' or a line break", d)
		}
	}
	return nil
}

// Plist is the LaunchAgent for s, or with s.User the LaunchDaemon that
// runs as that user from boot. KeepAlive restarts the daemon only when it
// exits non-zero: it exits 0 when a restart cannot help (WhatsApp logged
// out), so launchd does not loop.
func Plist(s Spec) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	str := func(v string) string {
		var e bytes.Buffer
		xml.EscapeText(&e, []byte(v))
		return "<string>" + e.String() + "</string>"
	}
	key := func(indent, k string) { fmt.Fprintf(&b, "%s<key>%s</key>\n", indent, k) }
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by 'nanoclawd service install'; run it again rather than editing this file. -->
<plist version="1.0">
<dict>
`)
	key("\t", "Label")
	if s.User != "" {
		fmt.Fprintf(&b, "\t%s\n", str(SystemLabel))
		key("\t", "UserName")
		fmt.Fprintf(&b, "\t%s\n", str(s.User))
	} else {
		fmt.Fprintf(&b, "\t%s\n", str(Label))
	}
	key("\t", "ProgramArguments")
	b.WriteString("\t<array>\n")
	for _, a := range []string{s.Binary, "run", "--config", s.Config} {
		fmt.Fprintf(&b, "\t\t%s\n", str(a))
	}
	b.WriteString("\t</array>\n")
	key("\t", "WorkingDirectory")
	fmt.Fprintf(&b, "\t%s\n", str(s.WorkDir))
	key("\t", "RunAtLoad")
	b.WriteString("\t<true/>\n")
	key("\t", "KeepAlive")
	b.WriteString("\t<dict>\n")
	key("\t\t", "SuccessfulExit")
	b.WriteString("\t\t<false/>\n\t</dict>\n")
	key("\t", "ThrottleInterval")
	fmt.Fprintf(&b, "\t<integer>%d</integer>\n", throttle)
	key("\t", "EnvironmentVariables")
	b.WriteString("\t<dict>\n")
	key("\t\t", "HOME")
	fmt.Fprintf(&b, "\t\t%s\n", str(s.Home))
	key("\t\t", "PATH")
	fmt.Fprintf(&b, "\t\t%s\n", str(strings.Join(s.Path, ":")))
	b.WriteString("\t</dict>\n")
	key("\t", "StandardOutPath")
	fmt.Fprintf(&b, "\t%s\n", str(filepath.Join(s.LogDir, "stdout.log")))
	key("\t", "StandardErrorPath")
	fmt.Fprintf(&b, "\t%s\n", str(filepath.Join(s.LogDir, "stderr.log")))
	b.WriteString("</dict>\n</plist>\n")
	return b.Bytes(), nil
}

// SystemdUnit is the systemd user unit for s. Restart=on-failure does not
// restart after exit 0, for the same reason as the plist's KeepAlive.
func SystemdUnit(s Spec) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if strings.ContainsAny(s.Binary, `"'\`) {
		return nil, fmt.Errorf("systemd cannot start a program whose path holds a quote or backslash (%s): move nanoclawd to a plain path and install again", s.Binary)
	}
	args := []string{execArg(s.Binary, true)}
	for _, a := range []string{"run", "--config", s.Config} {
		args = append(args, execArg(a, false))
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Written by 'nanoclawd service install'; run it again rather than editing this file.
[Unit]
Description=nanoclawd: Claude assistant in WhatsApp and Telegram chats

[Service]
Type=simple
ExecStart=%s
WorkingDirectory=%s
Restart=on-failure
RestartSec=%d
Environment=%s
Environment=%s
# Secrets (e.g. ANTHROPIC_API_KEY=…), one NAME=value a line, mode 0600.
EnvironmentFile=-%s
# Let running agents finish on stop (the daemon gives them 10 s).
TimeoutStopSec=30
KillMode=mixed

[Install]
WantedBy=default.target
`, strings.Join(args, " "), specifiers(s.WorkDir), throttle,
		envArg("HOME="+s.Home), envArg("PATH="+strings.Join(s.Path, ":")), specifiers(s.EnvFile))
	return b.Bytes(), nil
}

// specifiers escapes systemd's % specifiers in a value.
func specifiers(v string) string { return strings.ReplaceAll(v, "%", "%%") }

// execArg writes one word of ExecStart=: % is escaped, and so is $ except
// in the program path (systemd expands variables only in the arguments);
// a word with anything but plain path characters is double-quoted.
func execArg(v string, program bool) string {
	v = strings.ReplaceAll(v, "%", "%%")
	if !program {
		v = strings.ReplaceAll(v, "$", "$$")
	}
	if v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._+-=:@,%$") == "" {
		return v
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// envArg quotes one NAME=value for Environment=, where $ is literal.
func envArg(v string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "%", "%%")
	return `"` + r.Replace(v) + `"`
}
