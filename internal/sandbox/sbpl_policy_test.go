package sandbox

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// The macOS profile read as Seatbelt reads it (sbpl_read_test.go) and held
// to the policy it came from: the same world a Linux run sees, built from
// the merged policy by ForGroup, with an owner who lets groups read the
// whole home (which holds the daemon's config, data and every group) and
// a group override that tries to open what no group may write.
func TestMacProfileHoldsThePolicy(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(root, "Users", "o")
	nc := filepath.Join(home, "nanoclaw")
	l := layout.New(filepath.Join(nc, "data"), filepath.Join(nc, "groups"))
	group, other := l.Group("family"), l.Group("work")
	file := func(p string) string {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	dir := func(p string) string {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, d := range []string{l.Logs(), l.Gateways(), l.Outgoing(), l.Transcribing(), l.Backups(), string(l.IPC("family")), string(l.IPC("work")),
		l.Session("family"), l.Session("work"), l.GroupLogs("family"), l.Global(), filepath.Join(group, ".git", "hooks")} {
		dir(d)
	}
	for _, f := range l.StateFiles() {
		if _, err := os.Stat(f); err != nil {
			file(f)
		}
	}
	config := file(filepath.Join(nc, "nanoclaw.config.jsonc"))
	envFile := file(filepath.Join(nc, layout.EnvFile))
	binary := file(filepath.Join(nc, "bin", "nanoclawd"))
	script := file(filepath.Join(nc, "agent-runner", "dist", "index.js"))
	file(filepath.Join(nc, "agent-runner", "package.json"))
	notes := file(filepath.Join(home, "docs", "notes.md"))
	sshKey := file(filepath.Join(home, ".ssh", "id_ed25519"))
	homeEnv := file(filepath.Join(home, "docs", ".env"))
	homePem := file(filepath.Join(home, "docs", "site.pem"))
	groupEnv := file(filepath.Join(group, ".env"))
	gitConfig := file(filepath.Join(group, ".git", "config"))
	hook := file(filepath.Join(group, ".git", "hooks", "pre-commit"))
	nestedGit := file(filepath.Join(group, "src", "app", ".git", "HEAD"))
	mcpJSON := file(filepath.Join(group, ".mcp.json"))
	settings := file(filepath.Join(group, ".claude", "settings.json"))
	otherSecret := file(filepath.Join(other, "diary.md"))
	socket := file(filepath.Join(l.Gateways(), "1.sock"))

	global := security.Policy{AllowRead: []string{"~"}, DenyRead: []string{"~/.ssh", "**/.env", "**/*.pem"}}
	// The override tries to write the repository, the project MCP servers,
	// the daemon's data, the owner's keys and another group's folder.
	override := &security.Policy{AllowWrite: []string{filepath.Join(group, ".git"), mcpJSON, l.DataDir, "~/.ssh", other}}
	eff := security.Resolve(global, security.Group{Folder: "family", Override: override},
		security.Host{Home: home, ConfigFile: config, ConfigDir: nc, Layout: l, Socket: l.ControlSocket(), Folders: []string{"family", "work"}})
	p := ForGroup(eff, Limits{}, User{UID: os.Geteuid(), GID: os.Getegid()}, []string{"/usr/bin/env", "node", script}, binary,
		group, l.Session("family"), string(l.IPC("family")), socket)
	p.Listen = "127.0.0.1:49152" // as confine sets it on macOS
	profile := Profile(p)
	rs := rules(t, profile)
	t.Logf("profile:\n%s", profile)

	// Deny by default, before anything is allowed; nothing allowed
	// wholesale.
	if len(rs) == 0 || rs[0].text != "(deny default)" {
		t.Fatalf("the first rule is not (deny default): %v", rs[:min(1, len(rs))])
	}
	for _, r := range rs {
		if r.allow && len(r.filters) == 0 && slices.ContainsFunc(r.ops, func(op string) bool {
			return op == "default" || strings.HasPrefix(op, "file") || strings.HasPrefix(op, "network")
		}) {
			t.Errorf("%s allows files or the network without a filter", r.text)
		}
	}

	read := func(path string) (bool, int) { return decide(t, rs, "file-read-data", path) }
	write := func(path string) (bool, int) { return decide(t, rs, "file-write-data", path) }
	// lastAllow is the last rule allowing op on path (-1: none).
	lastAllow := func(op, path string) int {
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i].allow && slices.ContainsFunc(rs[i].ops, func(o string) bool { return covers(o, op) }) &&
				slices.ContainsFunc(rs[i].filters, func(f sexp) bool { return matchPath(t, f, path) }) {
				return i
			}
		}
		return -1
	}
	// linux is the mode of path in a Linux run: that of the last mount
	// over it (bubblewrap's order), "" where nothing shows it.
	linux := func(path string) string {
		mode := ""
		for _, m := range p.Mounts {
			if m.Path == path || (m.Dir && under(path, []string{m.Path})) {
				mode = m.Mode
			}
		}
		return mode
	}
	// deniedAfterAllow: an allow covers path, and a later deny takes it back.
	// Under /tmp (and so /private/tmp, macOS's real path) both are checked.
	deniedAfterAllow := func(op, path, why string) {
		t.Helper()
		for _, path := range withPrivatePath(path) {
			ok, by := decide(t, rs, op, path)
			allowed := lastAllow(op, path)
			switch {
			case ok:
				t.Errorf("%s %s: allowed by %s; %s", op, path, rs[by].text, why)
			case allowed < 0:
				t.Errorf("%s %s: no allow covers it, so its deny proves nothing; the test's world is wrong", op, path)
			case by < allowed:
				t.Errorf("%s %s: denied by %s before the allow %s", op, path, rs[by].text, rs[allowed].text)
			}
		}
	}

	// Every path the merged policy lets the group write, and the run's own
	// directories, are writable, and so is what is made inside them;
	// except what the policy says no group may write.
	refused := []string{filepath.Join(group, ".git"), mcpJSON, l.DataDir, filepath.Join(home, ".ssh"), other}
	writable := append(slices.Clone(eff.AllowWrite), l.Session("family"), string(l.IPC("family")), socket)
	var writableAll []string
	for _, w := range writable {
		writableAll = append(writableAll, withPrivatePath(w)...)
		if slices.Contains(refused, w) {
			continue
		}
		for _, path := range withPrivatePath(w) {
			if ok, by := write(path); !ok {
				t.Errorf("allowWrite %s is not writable (rule %d)", path, by)
			}
			if ok, _ := write(filepath.Join(path, "new", "file.txt")); !ok && w != socket {
				t.Errorf("a new file under allowWrite %s is not writable", path)
			}
		}
	}
	if ok, _ := decide(t, rs, "file-write-create", filepath.Join(group, "notes", "new.md")); !ok {
		t.Error("the group cannot create a file in its own folder")
	}
	// Nothing else is writable: every rule that allows a write names one
	// of those paths, a device of macDevices or /dev/fd.
	for _, r := range rs {
		if !r.allow || !slices.ContainsFunc(r.ops, func(op string) bool { return covers(op, "file-write-data") || covers("file-write*", op) }) {
			continue
		}
		for _, f := range r.filters {
			arg := f.items[len(f.items)-1].atom
			if !slices.Contains(writableAll, arg) && !slices.Contains(macDevices, arg) && arg != `^/dev/fd/[0-9]+$` {
				t.Errorf("%s lets the run write %s, which the policy does not name", r.text, arg)
			}
		}
	}
	// The protected names, the daemon's state and another group's folder
	// stay shut to writes although an allow (the override's, the group's
	// folder's) covers them.
	for path, why := range map[string]string{
		gitConfig: "the group's repository is the owner's (git would run its config)",
		hook:      "git runs hooks",
		nestedGit: "a repository anywhere in the folder is the owner's",
		filepath.Join(group, "new", "sub", ".git", "config"): "no new repository anywhere in the folder",
		mcpJSON:  "the project's MCP servers would loosen the next run",
		settings: "the project's settings would loosen the next run",
		filepath.Join(l.GroupLogs("family"), "audit.log"): "the group's audit trail",
		filepath.Join(group, ".envrc"):                    "direnv would run it (protected even when missing)",
		filepath.Join(group, ".githooks", "pre-push"):     "hook managers' directory",
		l.DB():      "the daemon's state",
		l.Lock():    "the daemon's state",
		otherSecret: "another group's folder",
	} {
		deniedAfterAllow("file-write-data", path, why)
		if m := linux(path); m == ReadWrite && !strings.Contains(path, "/new/") {
			t.Errorf("%s is writable in a Linux run; %s", path, why)
		}
	}
	// Protected names stay readable: the group may read its own repository.
	for _, path := range []string{gitConfig, mcpJSON, settings} {
		if ok, by := read(path); !ok {
			t.Errorf("%s is not readable (rule %d); protected means read-only", path, by)
		}
	}

	// Every allowRead path of the merged policy, the agent command and the
	// binary are readable, and not writable.
	for _, r := range append(slices.Clone(eff.AllowRead), notes, script, binary) {
		if _, err := os.Stat(r); err != nil {
			continue // the shared memory's folder, when it does not exist
		}
		if ok, by := read(r); !ok {
			t.Errorf("allowRead %s is not readable (rule %d)", r, by)
		}
	}
	for _, r := range []string{home, notes, nc, script, binary, config} {
		if ok, by := write(r); ok {
			t.Errorf("%s is writable (%s)", r, rs[by].text)
		}
	}

	// denyRead — literal paths, the "**/" globs, the daemon's own files, the
	// config and its secrets, other groups — is denied after the allow that
	// covers it, for reading and writing.
	for path, why := range map[string]string{
		sshKey: "denyRead ~/.ssh", homeEnv: "denyRead **/.env", homePem: "denyRead **/*.pem", groupEnv: "denyRead **/.env in the group's own folder",
		config: "the config", envFile: "the config's secrets", l.DB(): "the daemon's database", l.DB() + "-wal": "the daemon's database",
		l.WhatsAppDB(): "WhatsApp's session", l.DaemonLog(): "the daemon's log", otherSecret: "another group's folder",
		filepath.Join(l.Session("work"), "x.jsonl"): "another group's session", filepath.Join(string(l.IPC("work")), "messages", "1.json"): "another group's IPC",
	} {
		deniedAfterAllow("file-read-data", path, why)
		if m := linux(path); m != Hidden && m != "" {
			t.Errorf("%s (%s) shows in a Linux run: %s", path, why, m)
		}
		if ok, by := write(path); ok {
			t.Errorf("%s (%s) is writable: %s", path, why, rs[by].text)
		}
	}

	// The system runtime is readable; what Homebrew keeps besides the
	// agent's runtime, the rest of /etc and other users' homes are not.
	for path, want := range map[string]bool{
		"/usr/lib/libSystem.B.dylib": true, "/System/Library/Frameworks/Security.framework/Security": true,
		"/private/etc/ssl/cert.pem": true, "/private/etc/sudoers": false, "/private/var/root/.zsh_history": false,
		"/usr/local/var/postgres/PG_VERSION": false, "/opt/homebrew/var/mysql/ibdata1": false, "/Users/other/notes.md": false,
		"/dev/null": true, "/dev/ttys000": false,
	} {
		if ok, by := read(path); ok != want {
			t.Errorf("read %s: allowed = %v (rule %d), want %v", path, ok, by, want)
		}
	}
	// A runtime resolving a path (realpath) looks at each directory above
	// it: their metadata is readable, their listing not.
	for _, dir := range append([]string{"/", "/private", "/var", "/tmp", "/etc", "/dev"}, ancestors([]Mount{{Path: group, Mode: ReadWrite}})...) {
		if ok, _ := decide(t, rs, "file-read-metadata", dir); !ok {
			t.Errorf("the metadata of %s is not readable: realpath fails", dir)
		}
		if ok, _ := read(dir); ok && !under(dir, []string{home}) {
			t.Errorf("%s can be listed", dir)
		}
	}
	if ok, _ := write("/dev/null"); !ok {
		t.Error("/dev/null is not writable")
	}
	for _, op := range []string{"process-fork", "process-exec", "sysctl-read", "mach-lookup", "signal", "ipc-posix-shm-read-data"} {
		if !slices.ContainsFunc(rs, func(r sbRule) bool {
			return r.allow && slices.ContainsFunc(r.ops, func(o string) bool { return covers(o, op) })
		}) {
			t.Errorf("%s is never allowed: the agent cannot run", op)
		}
	}
	if ok, by := decide(t, rs, "file-write-setugid", filepath.Join(group, "x")); ok {
		t.Errorf("a setuid bit can be written: %s", rs[by].text)
	}

	// The network: the gateway's socket, and its port on localhost for
	// sandbox-init, nothing else.
	_, port, _ := net.SplitHostPort(p.Listen)
	want := map[string]bool{
		`(allow network-bind network-inbound (local ip "localhost:` + port + `"))`: true,
		`(allow network-outbound (remote ip "localhost:` + port + `"))`:            true,
	}
	for _, sock := range withPrivatePath(socket) {
		want[`(allow network-outbound (remote unix-socket (path-literal "`+sock+`")))`] = true
	}
	for _, r := range rs {
		if !slices.ContainsFunc(r.ops, func(op string) bool { return strings.HasPrefix(op, "network") }) {
			continue
		}
		if !r.allow {
			continue
		}
		if !want[r.text] {
			t.Errorf("network rule beyond the gateway: %s", r.text)
		}
		delete(want, r.text)
	}
	for r := range want {
		t.Errorf("the gateway is not reachable: no %s", r)
	}
}
