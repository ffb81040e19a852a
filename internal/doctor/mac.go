package doctor

// Checks for a Mac left running unattended (a Mac mini in a cupboard):
// it must not sleep, its dataDir must not sit in a folder a sync client
// rewrites under SQLite's feet, and the daemon must start after a reboot
// without anyone logging in. The parsing is plain functions tested with
// recorded output; MacProbe is what reads the real machine.

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/service"
)

// MacProbe reads what the Mac checks need from the machine.
type MacProbe struct {
	Home string
	// Pmset is the output of `pmset -g`.
	Pmset func(ctx context.Context) (string, error)
	// AutoLoginUser is the account macOS logs in at boot ("" = none).
	AutoLoginUser func(ctx context.Context) string
	// Exists says whether a file exists.
	Exists func(path string) bool
	// LibraryRoot is where /Library is ("/" on a real Mac).
	LibraryRoot string
}

// RealMac probes this Mac.
func RealMac() MacProbe {
	home, _ := os.UserHomeDir()
	return MacProbe{
		Home: home,
		Pmset: func(ctx context.Context) (string, error) {
			out, err := exec.CommandContext(ctx, "pmset", "-g").Output()
			return string(out), err
		},
		AutoLoginUser: func(ctx context.Context) string {
			out, err := exec.CommandContext(ctx, "defaults", "read", "/Library/Preferences/com.apple.loginwindow", "autoLoginUser").Output()
			if err != nil {
				return "" // the key is absent: no automatic login
			}
			return strings.TrimSpace(string(out))
		},
		Exists: func(p string) bool {
			_, err := os.Stat(p)
			return !errors.Is(err, fs.ErrNotExist)
		},
		LibraryRoot: "/",
	}
}

// Mac runs the macOS checks.
func Mac(ctx context.Context, p MacProbe, cfg *config.Config) []Result {
	var out []Result
	if text, err := p.Pmset(ctx); err != nil {
		out = append(out, warn("sleep", "could not read the power settings (pmset -g: %v); make sure the Mac never sleeps on its own", err))
	} else {
		out = append(out, Sleep(ParsePmset(text)))
	}
	out = append(out, SyncedDataDir(cfg.DataDir, p.Home))
	agent := (&service.Manager{GOOS: "darwin", Home: p.Home}).File()
	daemon := (&service.Manager{GOOS: "darwin", System: true, Root: p.LibraryRoot}).File()
	return append(out, StartAtBoot(p.Exists(agent), p.Exists(daemon), p.AutoLoginUser(ctx)))
}

func warn(check, format string, args ...any) Result {
	r := ok(check, format, args...)
	r.Warn = true
	return r
}

// PmsetSetting is one line of `pmset -g`: its value and what follows it
// (e.g. "(sleep prevented by sharingd, powerd)").
type PmsetSetting struct{ Value, Note string }

// ParsePmset reads the settings of `pmset -g` output ("Currently in use"):
// each line is a name (which may hold spaces, "Sleep On Power Button"),
// a number or a path, and maybe a note.
func ParsePmset(out string) map[string]PmsetSetting {
	settings := map[string]PmsetSetting{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 1; i < len(f); i++ {
			if _, err := strconv.Atoi(f[i]); err == nil || strings.HasPrefix(f[i], "/") {
				settings[strings.Join(f[:i], " ")] = PmsetSetting{Value: f[i], Note: strings.Join(f[i+1:], " ")}
				break
			}
		}
	}
	return settings
}

// Sleep warns when the Mac goes to sleep when idle (nanoclawd stops
// answering then) or stays off after a power cut.
func Sleep(s map[string]PmsetSetting) Result {
	var r Result
	switch sl, found := s["sleep"]; {
	case !found:
		r = warn("sleep", "pmset -g shows no sleep setting; make sure the Mac never sleeps on its own")
	case sl.Value == "0":
		r = ok("sleep", "the Mac never sleeps on its own (pmset sleep 0)")
	default:
		r = warn("sleep", "the Mac sleeps after %s min idle, and nanoclawd answers nothing while it sleeps: run 'sudo pmset -a sleep 0' (or System Settings > Energy: prevent automatic sleeping)", sl.Value)
		if strings.Contains(sl.Note, "prevented by") {
			r.More = append(r.More, "sleep is "+strings.Trim(sl.Note, "()")+" right now, which lasts only as long as those programs want")
		}
	}
	if a, found := s["autorestart"]; found && a.Value == "0" {
		r.Warn = true
		r.More = append(r.More, "after a power cut the Mac stays off: run 'sudo pmset -a autorestart 1' (System Settings > Energy: start up automatically after a power failure)")
	}
	return r
}

// syncedDirs are folders, relative to the home, that a sync client
// rewrites: a SQLite database there can be replaced by an older copy or
// split into conflicted copies while the daemon writes it.
var syncedDirs = []struct{ dir, by string }{
	{"Library/Mobile Documents", "iCloud Drive"},
	{"Library/CloudStorage", "a cloud storage provider (File Provider)"},
	{"Dropbox", "Dropbox"},
	{"Google Drive", "Google Drive"},
	{"OneDrive", "OneDrive"},
	{"Box", "Box"},
	{"Desktop", "iCloud Drive, when 'Desktop & Documents Folders' is on"},
	{"Documents", "iCloud Drive, when 'Desktop & Documents Folders' is on"},
}

// SyncedFolder names the sync service that may own path, or "".
func SyncedFolder(path, home string) string {
	rel, err := filepath.Rel(home, path)
	if err != nil || !filepath.IsLocal(rel) {
		return ""
	}
	for _, s := range syncedDirs {
		if rel == s.dir || strings.HasPrefix(rel, s.dir+"/") {
			return s.by
		}
	}
	first := strings.Split(rel, "/")[0]
	if strings.HasPrefix(first, "Dropbox") || strings.HasPrefix(first, "OneDrive") {
		return strings.Fields(strings.NewReplacer("-", " ", "(", " ").Replace(first))[0]
	}
	return ""
}

// SyncedDataDir warns when dataDir lies in a synced folder.
func SyncedDataDir(dataDir, home string) Result {
	if by := SyncedFolder(dataDir, home); by != "" {
		return warn("data dir", "%s may be synced by %s, which can replace or duplicate its SQLite files while nanoclawd writes them: move dataDir to a folder no sync client touches (e.g. ~/nanoclawd/data) and back up with 'nanoclawd backup' instead", dataDir, by)
	}
	return ok("data dir", "%s is not in a synced folder", dataDir)
}

// StartAtBoot warns when nanoclawd would not start after a reboot until
// someone logs in: a LaunchAgent starts only at login.
func StartAtBoot(agent, daemon bool, autoLogin string) Result {
	switch {
	case daemon:
		return ok("start at boot", "the LaunchDaemon starts nanoclawd at boot, before anyone logs in")
	case agent && autoLogin != "":
		return ok("start at boot", "the LaunchAgent starts at the automatic login of %s", autoLogin)
	case agent:
		return warn("start at boot", "the LaunchAgent starts nanoclawd only when you log in: after a reboot or a power cut it stays down until someone does. Run 'sudo nanoclawd service install --system' (a LaunchDaemon that runs as you from boot), or turn on automatic login")
	}
	return warn("start at boot", "nanoclawd is not installed as a service, so nothing starts it after a reboot: run 'sudo nanoclawd service install --system'")
}
