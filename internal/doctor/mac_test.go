package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/config"
)

// The pmset -g texts in testdata: pmset-laptop.txt is a MacBook's output
// as published with the pmset man page at real-world-systems.com (macOS
// 12, trailing spaces kept); the two pmset-mini-*.txt are composed in the
// same format for a Mac mini (no lid or battery keys, "Sleep On Power
// Button", autorestart). None was recorded on a Mac by this project.
func pmset(t *testing.T, name string) map[string]PmsetSetting {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return ParsePmset(string(b))
}

func TestParsePmset(t *testing.T) {
	s := pmset(t, "pmset-laptop.txt")
	if got := s["sleep"]; got.Value != "1" || got.Note != "(sleep prevented by sharingd)" {
		t.Errorf("sleep = %+v", got)
	}
	if s["hibernatefile"].Value != "/var/vm/sleepimage" || s["disksleep"].Value != "0" || s["standbydelayhigh"].Value != "86400" {
		t.Errorf("parsed %+v", s)
	}
	m := pmset(t, "pmset-mini-awake.txt")
	if m["Sleep On Power Button"].Value != "1" || m["sleep"].Value != "0" || m["autorestart"].Value != "1" {
		t.Errorf("parsed %+v", m)
	}
	if _, ok := m["Currently in use:"]; ok {
		t.Error("a heading was read as a setting")
	}
}

func TestSleep(t *testing.T) {
	tests := []struct {
		file     string
		warn     bool
		contains []string
	}{
		{"pmset-mini-awake.txt", false, []string{"never sleeps"}},
		{"pmset-laptop.txt", true, []string{"sleeps after 1 min idle", "sudo pmset -a sleep 0", "sleep prevented by sharingd right now"}},
		{"pmset-mini-default.txt", true, []string{"sudo pmset -a sleep 0", "powerd, sharingd", "sudo pmset -a autorestart 1"}},
	}
	for _, tt := range tests {
		r := Sleep(pmset(t, tt.file))
		if !r.OK || r.Warn != tt.warn {
			t.Errorf("%s: %+v, want warn %v", tt.file, r, tt.warn)
		}
		for _, c := range tt.contains {
			if !strings.Contains(r.String(), c) {
				t.Errorf("%s: %q lacks %q", tt.file, r.String(), c)
			}
		}
	}
	if r := Sleep(ParsePmset("")); !r.Warn {
		t.Errorf("no sleep setting at all: %+v", r)
	}
}

func TestSyncedFolder(t *testing.T) {
	home := "/Users/ann"
	tests := map[string]string{
		"/Users/ann/Library/Mobile Documents/com~apple~CloudDocs/nc/data":     "iCloud Drive",
		"/Users/ann/Library/CloudStorage/GoogleDrive-ann@x.com/My Drive/data": "a cloud storage provider (File Provider)",
		"/Users/ann/Dropbox/nanoclawd/data":                                   "Dropbox",
		"/Users/ann/Dropbox (Personal)/nanoclawd/data":                        "Dropbox",
		"/Users/ann/OneDrive - Contoso/data":                                  "OneDrive",
		"/Users/ann/Documents/nanoclawd/data":                                 "iCloud Drive, when 'Desktop & Documents Folders' is on",
		"/Users/ann/nanoclawd/data":                                           "",
		"/Users/ann/DocumentsArchive/data":                                    "",
		"/opt/nanoclawd/data":                                                 "",
	}
	for path, want := range tests {
		if got := SyncedFolder(path, home); got != want {
			t.Errorf("SyncedFolder(%s) = %q, want %q", path, got, want)
		}
	}
}

func TestStartAtBoot(t *testing.T) {
	for _, tt := range []struct {
		agent, daemon bool
		auto          string
		warn          bool
		says          string
	}{
		{false, true, "", false, "LaunchDaemon starts nanoclawd at boot"},
		{true, false, "ann", false, "automatic login of ann"},
		{true, false, "", true, "only when you log in"},
		{false, false, "", true, "not installed as a service"},
	} {
		r := StartAtBoot(tt.agent, tt.daemon, tt.auto)
		if r.Warn != tt.warn || !strings.Contains(r.Detail, tt.says) {
			t.Errorf("StartAtBoot(%v, %v, %q) = %+v", tt.agent, tt.daemon, tt.auto, r)
		}
	}
}

// Mac ties the three together against a probed machine: the LaunchAgent
// file in the home, no LaunchDaemon, no automatic login.
func TestMacChecks(t *testing.T) {
	home := t.TempDir()
	agent := filepath.Join(home, "Library/LaunchAgents/com.nanoclawd.agent.plist")
	os.MkdirAll(filepath.Dir(agent), 0o755)
	os.WriteFile(agent, []byte("<plist/>"), 0o644)
	laptop, _ := os.ReadFile("testdata/pmset-laptop.txt")
	p := MacProbe{
		Home:          home,
		Pmset:         func(context.Context) (string, error) { return string(laptop), nil },
		AutoLoginUser: func(context.Context) string { return "" },
		Exists:        func(p string) bool { _, err := os.Stat(p); return err == nil },
		LibraryRoot:   t.TempDir(),
	}
	cfg := &config.Config{DataDir: filepath.Join(home, "Dropbox", "data")}
	var lines []string
	for _, r := range Mac(context.Background(), p, cfg) {
		lines = append(lines, r.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{"WARN sleep: the Mac sleeps", "WARN data dir: " + cfg.DataDir + " may be synced by Dropbox", "WARN start at boot: the LaunchAgent starts nanoclawd only when you log in"} {
		if !strings.Contains(got, want) {
			t.Errorf("doctor on a Mac lacks %q:\n%s", want, got)
		}
	}
	p.Pmset = func(context.Context) (string, error) { return "", errors.New("not found") }
	if r := Mac(context.Background(), p, cfg)[0]; !r.Warn || !strings.Contains(r.Detail, "could not read the power settings") {
		t.Errorf("pmset failing: %+v", r)
	}
}
