package selftest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/selftest"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m) }

func install(t *testing.T) (dir, cfg, home string) {
	dir, home = t.TempDir(), t.TempDir()
	// A root daemon's runs are another user, who must pass through the
	// test's directories to reach the install (as an owner's home allows).
	for _, d := range []string{filepath.Dir(dir), dir, home} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cfg = filepath.Join(dir, "nanoclaw.config.jsonc")
	if err := os.WriteFile(cfg, []byte(`{"dataDir": "data", "groupsDir": "groups"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, cfg, home
}

func env(home string, more ...string) []string {
	return append(append(os.Environ(), "HOME="+home), more...)
}

// `security test` reports every boundary, in order, one line each; each
// holds here; and what it
// planted is gone afterwards.
func TestSecurityTestHolds(t *testing.T) {
	dir, cfg, home := install(t)
	out, errs, code := e2e.Run(t, dir, env(home), "--config", cfg, "security", "test")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// What this OS lacks against Linux follows, one "weaker:" line each.
	weaker := slices.DeleteFunc(slices.Clone(lines), func(l string) bool { return !strings.HasPrefix(l, "weaker: ") })
	if want := sandbox.Weaker(runtime.GOOS); len(weaker) != len(want) {
		t.Errorf("weaker lines %q, want one for each of %q", weaker, want)
	}
	lines = lines[:len(lines)-len(weaker)]
	if len(lines) != len(selftest.Boundaries) {
		t.Fatalf("%d lines, want one per boundary:\n%s\n%s", len(lines), out, errs)
	}
	broken := 0
	for i, b := range selftest.Boundaries {
		f := strings.Fields(lines[i])
		if len(f) < 2 || f[0] != b || (f[1] != "held" && f[1] != "BROKEN") {
			t.Errorf("line %d: %q, want %s held|BROKEN", i, lines[i], b)
			continue
		}
		if f[1] == "BROKEN" {
			broken++
			t.Errorf("%s", lines[i])
		}
	}
	if (broken == 0) != (code == 0) {
		t.Errorf("exit %d with %d broken: %s", code, broken, errs)
	}
	if code != 0 && !strings.Contains(errs, "broken") {
		t.Errorf("stderr does not name what broke: %q", errs)
	}
	for _, d := range []string{home, filepath.Join(dir, "data"), filepath.Join(dir, "groups"), filepath.Join(dir, "data", "sessions"), filepath.Join(dir, "data", "ipc"), dir} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.Contains(e.Name(), "selftest") {
				t.Errorf("left behind: %s", filepath.Join(d, e.Name()))
			}
		}
	}

	// The same as JSON.
	out, _, _ = e2e.Run(t, dir, env(home), "--config", cfg, "security", "test", "--json")
	var rep selftest.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Boundaries) != len(selftest.Boundaries) || rep.OS == "" || rep.OK != (broken == 0) || !slices.Equal(rep.Weaker, sandbox.Weaker(runtime.GOOS)) {
		t.Errorf("JSON report: %+v", rep)
	}
}

// With one rule dropped, the test says which boundary broke, what was
// reached, and exits non-zero.
func TestSecurityTestNamesABrokenBoundary(t *testing.T) {
	dir, cfg, home := install(t)
	for _, c := range []struct{ weaken, reached string }{
		{"home", "read " + home},
		{"data", "read " + filepath.Join(dir, "data")},
		{"groups", "notes.md"},
		{"write", "wrote " + filepath.Join(dir, "data")},
		{"loopback", "the host's loopback"},
		{"network", "an address of the host"},
	} {
		out, errs, code := e2e.Run(t, dir, env(home, selftest.WeakenEnv+"="+c.weaken), "--config", cfg, "security", "test")
		if c.weaken == "network" && strings.Contains(errs, "no address of this host besides loopback") {
			continue // nothing to weaken with here
		}
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, c.weaken+" ") {
				line = l
			}
		}
		if code == 0 || !strings.Contains(line, "BROKEN") || !strings.Contains(line, c.reached) || !strings.Contains(errs, c.weaken) {
			t.Errorf("weakened %s: exit %d, line %q, stderr %q", c.weaken, code, line, errs)
		}
	}
}
