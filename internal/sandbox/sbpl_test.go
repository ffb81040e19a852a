package sandbox

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The macOS profile cannot run here; its text is what is tested: the
// golden file, and each promise of docs/security.md checked on its own.
func TestMacProfile(t *testing.T) {
	brew := filepath.Join(t.TempDir(), "homebrew")
	receipt := func(keg, deps string) {
		os.MkdirAll(filepath.Join(brew, "Cellar", keg, "bin"), 0o755)
		os.WriteFile(filepath.Join(brew, "Cellar", keg, "INSTALL_RECEIPT.json"), []byte(`{"runtime_dependencies":[`+deps+`]}`), 0o644)
	}
	receipt("node/22.1.0", `{"full_name":"icu4c@76"},{"full_name":"homebrew/core/libuv"}`)
	receipt("icu4c@76/76.1", `{"full_name":"xz"}`)
	receipt("libuv/1.49.0", ``)
	receipt("xz/5.6.3", ``)
	receipt("postgresql@16/16.4", ``) // installed, not needed by the runtime
	old, oldLinks := homebrewPrefixes, macLinks
	homebrewPrefixes = []string{brew, "/usr/local"}
	macLinks = nil // the temporary directory may lie in /tmp or /var: the golden text is the same
	defer func() { homebrewPrefixes, macLinks = old, oldLinks }()

	p := Plan{
		Workdir: "/Users/o/nanoclaw/groups/family",
		Socket:  "/Users/o/nanoclaw/data/gw/1.sock",
		Listen:  "127.0.0.1:49152",
		Mounts: []Mount{
			{Path: "/tmp", Mode: Private, Dir: true},
			{Path: brew + "/bin", Mode: ReadOnly, Dir: true, Why: "agent.command"},
			{Path: brew + "/Cellar/node/22.1.0/bin", Mode: ReadOnly, Dir: true, Why: "agent.command"},
			{Path: "/Users/o/nanoclaw/agent-runner", Mode: ReadOnly, Dir: true, Why: "agent.command"},
			{Path: "/Users/o/nanoclaw/groups/family", Mode: ReadWrite, Dir: true, Why: "the group's folder"},
			{Path: "/Users/o/nanoclaw/data/gw/1.sock", Mode: ReadWrite, Why: "the egress gateway"},
			{Path: "/Users/o/nanoclaw/groups/family/logs", Mode: ReadOnly, Dir: true, Why: "protected"},
			{Path: "/Users/o/nanoclaw/groups/family/.env", Mode: Hidden, Why: "denyRead"},
		},
	}
	profile := Profile(p)
	// The golden text as if the prefix were /opt/homebrew (the temporary
	// directories above it dropped).
	tmp := regexp.MustCompile(` \(literal "` + regexp.QuoteMeta(filepath.Dir(filepath.Dir(brew))) + `[^"]*"\)`)
	golden(t, "macos-profile-homebrew.golden.sb", strings.ReplaceAll(tmp.ReplaceAllString(profile, ""), brew, "/opt/homebrew"))

	for _, want := range []string{
		"(deny default)",
		`(deny file-write-setugid)`,
		`(allow network-outbound (remote ip "localhost:49152"))`,
		`(allow network-bind network-inbound (local ip "localhost:49152"))`,
		`(literal "/dev/null")`, `(literal "/dev/urandom")`, `(literal "/dev/dtracehelper")`,
		`(allow file-read* (subpath "` + brew + `/Cellar/xz"))`,    // a dependency of a dependency
		`(allow file-read* (subpath "` + brew + `/Cellar/libuv"))`, // named by a tap's full name
		`(allow file-read* (literal "` + brew + `/opt/icu4c@76"))`,
		`(deny file-read* (subpath "` + brew + `") (subpath "/usr/local"))`,
	} {
		if !strings.Contains(profile, want) {
			t.Errorf("profile lacks %s", want)
		}
	}
	for _, never := range []string{"/dev/tty", `localhost:*`, `(allow file-read* (literal "/dev")`, "postgresql", brew + "/var", brew + "/etc", "/proc", `(subpath "/dev`} {
		if strings.Contains(profile, never) {
			t.Errorf("profile has %s:\n%s", never, profile)
		}
	}
	// Only the gateway's port: one network-outbound rule for an ip.
	if n := strings.Count(profile, "(remote ip "); n != 1 {
		t.Errorf("%d outbound ip rules, want the gateway's only", n)
	}

	// The .git rule, read as a regular expression, covers a repository
	// anywhere under the folder and nothing beside it.
	m := regexp.MustCompile(`\(deny file-write\* \(regex #"(.*)"\)\)`).FindStringSubmatch(profile)
	if m == nil {
		t.Fatal("no .git rule")
	}
	re := regexp.MustCompile(strings.ReplaceAll(m[1], `\"`, `"`))
	for path, denied := range map[string]bool{
		"/Users/o/nanoclaw/groups/family/.git":             true,
		"/Users/o/nanoclaw/groups/family/.git/config":      true,
		"/Users/o/nanoclaw/groups/family/src/x/.git/hooks": true,
		"/Users/o/nanoclaw/groups/family/.gitignore":       false,
		"/Users/o/nanoclaw/groups/family/notes.git.md":     false,
		"/Users/o/nanoclaw/groups/familyX/.git":            false,
	} {
		if re.MatchString(path) != denied {
			t.Errorf("%s: denied = %v, want %v", path, !denied, denied)
		}
	}
}

// Seatbelt matches the path a file really has: a path through macOS's own
// links into /private (/var/folders, where TMPDIR is; /tmp) is named at
// both, in the same place of the order; another path only as it is.
func TestMacProfileNamesRealPaths(t *testing.T) {
	p := Plan{
		Workdir: "/var/folders/xy/T/nc/groups/family",
		Socket:  "/var/folders/xy/T/nc/data/gw/1.sock",
		Mounts: []Mount{
			{Path: "/var/folders/xy/T/nc/groups/family", Mode: ReadWrite, Dir: true, Why: "the group's folder"},
			{Path: "/var/folders/xy/T/nc/groups/family/.env", Mode: Hidden, Why: "denyRead"},
			{Path: "/Users/o/docs", Mode: ReadOnly, Dir: true, Why: "allowRead"},
		},
	}
	profile := Profile(p)
	for _, want := range []string{
		"(allow file-read* file-write* (subpath \"/var/folders/xy/T/nc/groups/family\")) ; the group's folder\n" +
			"(allow file-read* file-write* (subpath \"/private/var/folders/xy/T/nc/groups/family\")) ; the group's folder\n" +
			"(deny file-read* file-write* (literal \"/var/folders/xy/T/nc/groups/family/.env\")) ; denyRead\n" +
			"(deny file-read* file-write* (literal \"/private/var/folders/xy/T/nc/groups/family/.env\")) ; denyRead\n",
		`(deny file-write* (regex #"^/private/var/folders/xy/T/nc/groups/family/(.*/)?\.git(/|$)"))`,
		`(remote unix-socket (path-literal "/private/var/folders/xy/T/nc/data/gw/1.sock"))`,
		`(literal "/private/var/folders/xy/T/nc")`, // its parents' metadata
	} {
		if !strings.Contains(profile, want) {
			t.Errorf("profile lacks %s:\n%s", want, profile)
		}
	}
	if strings.Contains(profile, "/private/Users") {
		t.Errorf("a path without a link into /private got one:\n%s", profile)
	}
}
