package sandbox

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// world is a host with an owner's home, a group folder, a sibling and the
// daemon's data dir.
func world(t *testing.T) (root string, in Input) {
	t.Helper()
	root, _ = filepath.EvalSymlinks(t.TempDir())
	// bwrap started as the run's user resolves every bound path as that
	// user: the test's private temp dir must let it pass.
	if err := os.Chmod(filepath.Dir(root), 0o711); err != nil {
		t.Fatal(err)
	}
	mk := func(p string, file bool) string {
		p = filepath.Join(root, p)
		if file {
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk("home/docs/recipes.md", true)
	mk("home/docs/.env", true)
	mk("home/docs/sub/.env", true)
	mk("home/.ssh/id_rsa", true)
	mk("agent/package.json", true)
	mk("agent/dist/index.js", true)
	mk("groups/family/.git/hooks", false)
	mk("groups/family/.git/config", true)
	mk("groups/family/logs", false)
	return root, Input{
		Command:    []string{"/usr/bin/env", filepath.Join(root, "agent/dist/index.js")},
		Binary:     mk("bin/nanoclawd", true),
		GroupDir:   filepath.Join(root, "groups/family"),
		SessionDir: mk("data/sessions/family", false),
		IPCDir:     mk("data/ipc/family", false),
		AllowRead:  []string{filepath.Join(root, "home")},
		DenyRead:   []string{filepath.Join(root, "home/.ssh"), "**/.env", filepath.Join(root, "data/ipc")},
		Limits:     testLimits,
	}
}

func find(p Plan, path string) (Mount, bool) {
	i := slices.IndexFunc(p.Mounts, func(m Mount) bool { return m.Path == path })
	if i < 0 {
		return Mount{}, false
	}
	return p.Mounts[i], true
}

func TestPlanIsAnAllowList(t *testing.T) {
	root, in := world(t)
	p := New(in)
	for path, mode := range map[string]string{
		"/tmp":                                Private,
		"/usr":                                ReadOnly,
		in.Binary:                             ReadOnly,
		filepath.Join(root, "agent"):          ReadOnly, // the script's package, for its node_modules
		filepath.Join(root, "home"):           ReadOnly,
		filepath.Join(root, "home/.ssh"):      Hidden,
		filepath.Join(root, "home/docs/.env"): Hidden,
		filepath.Join(root, "home/docs/sub/.env"): Hidden,
		in.GroupDir:                          ReadWrite,
		in.SessionDir:                        ReadWrite,
		in.IPCDir:                            ReadWrite,
		filepath.Join(in.GroupDir, ".git"):   ReadOnly,
		filepath.Join(in.GroupDir, "logs"):   ReadOnly,
		filepath.Join(in.GroupDir, ".envrc"): ReadOnly,
	} {
		m, ok := find(p, path)
		if !ok || m.Mode != mode {
			t.Errorf("%s: got %+v (found %v), want mode %s", path, m, ok, mode)
		}
	}
	// Nothing else of the host: not /etc as a whole, not the data dir, not
	// the groups dir, not the root.
	for _, path := range []string{"/etc", "/", root, filepath.Join(root, "data"), filepath.Join(root, "groups"), "/root", "/home"} {
		if m, ok := find(p, path); ok {
			t.Errorf("%s is in the plan: %+v", path, m)
		}
	}
	// The ipc dir denied as a whole is not visible in the first place (no
	// allowed tree holds it), so it needs no cut-out; the group's own IPC dir
	// is bound on its own.
	if m, ok := find(p, filepath.Join(root, "data/ipc")); ok {
		t.Errorf("data/ipc cut out of nothing: %+v", m)
	}
	if m, _ := find(p, filepath.Join(in.GroupDir, ".envrc")); !m.Missing {
		t.Errorf(".envrc does not exist, so it needs a placeholder: %+v", m)
	}
}

func TestBwrapArgsGolden(t *testing.T) {
	p := Plan{
		Init:    []string{"/opt/nanoclawd", "sandbox-init"},
		Workdir: "/srv/nc/groups/family",
		Socket:  "/srv/nc/data/gw/1.sock",
		Limits:  testLimits,
		Mounts: []Mount{
			{Path: "/tmp", Mode: Private, Dir: true},
			{Path: "/usr", Mode: ReadOnly, Dir: true},
			{Path: "/bin", Mode: ReadOnly, Link: "usr/bin"},
			{Path: "/home/o/docs", Mode: ReadOnly, Dir: true},
			{Path: "/home/o/docs/.ssh", Mode: Hidden, Dir: true},
			{Path: "/home/o/docs/.env", Mode: Hidden},
			{Path: "/srv/nc/groups/family", Mode: ReadWrite, Dir: true},
			{Path: "/srv/nc/data/gw/1.sock", Mode: ReadWrite},
			{Path: "/srv/nc/groups/family/logs", Mode: ReadOnly, Dir: true},
			{Path: "/srv/nc/groups/family/.envrc", Mode: ReadOnly, Missing: true},
			{Path: "/srv/nc/groups/family/.git", Mode: ReadOnly, Dir: true, Missing: true},
		},
	}
	got := strings.Join(BwrapArgs(p, User{DefaultRunID, DefaultRunID}, FirstFD, InitArgs(p, []string{"/usr/bin/node", "/srv/agent/dist/index.js"})), "\n") + "\n"
	golden(t, "bwrap-args.golden", got)
	profile := Profile(p)
	golden(t, "macos-profile.golden.sb", profile)
	for _, want := range []string{"(deny default)", `(deny file-read* file-write* (subpath "/home/o/docs/.ssh"))`,
		`(allow file-read* file-write* (subpath "/srv/nc/groups/family"))`, `(deny file-write* (literal "/srv/nc/groups/family/.envrc"))`} {
		if !strings.Contains(profile, want) {
			t.Errorf("profile lacks %s", want)
		}
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update once)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (go test -update after an intended change):\n%s", name, got)
	}
}

var testLimits = Limits{Processes: 512, FileSize: 1 << 30, TmpSize: 512 << 20, ShmSize: 64 << 20, Memory: 4 << 30, Disk: 2 << 30}

// A program named without a path is taken from the system runtime when
// PATH has it there, even behind a shim earlier in PATH.
func TestLookPathPrefersTheSystemRuntime(t *testing.T) {
	shims := t.TempDir()
	if err := os.WriteFile(filepath.Join(shims, "sh"), []byte("#!/bin/sh\nexec pyenv-like \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", shims+":/usr/bin:/bin")
	if got := lookPath("sh"); !under(got, System) {
		t.Errorf("lookPath(sh) = %s, want the system's", got)
	}
	only := filepath.Join(shims, "only-here")
	os.WriteFile(only, []byte("#!/bin/sh\n"), 0o755)
	if got := lookPath("only-here"); got != only {
		t.Errorf("lookPath(only-here) = %s, want %s", got, only)
	}
}

// Even an allowRead that opens the whole data dir shows a run none of the
// daemon's state: every layout.StateFiles path is cut out, and the group's
// own IPC directory and session come back read-write.
func TestStateFilesHiddenInAnAllowedDataDir(t *testing.T) {
	root, _ := filepath.EvalSymlinks(t.TempDir())
	l := layout.New(filepath.Join(root, "data"), filepath.Join(root, "groups"))
	dirs := []string{l.Logs(), l.Gateways(), l.IPCRoot(), string(l.IPC("family")), l.Session("family"), l.Session("work"), l.Group("family")}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range l.StateFiles() {
		if _, err := os.Stat(f); err != nil {
			if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	global := security.Policy{AllowRead: []string{l.DataDir}}
	eff := security.Resolve(global, security.Group{Folder: "family"},
		security.Host{Layout: l, ConfigDir: root, ConfigFile: filepath.Join(root, "nanoclaw.config.jsonc"), Folders: []string{"family", "work"}})
	p := New(Input{GroupDir: l.Group("family"), SessionDir: l.Session("family"), IPCDir: string(l.IPC("family")),
		AllowRead: eff.AllowRead, DenyRead: eff.DenyRead})
	if m, ok := find(p, l.DataDir); !ok || m.Mode != ReadOnly {
		t.Fatalf("the allowed data dir is not visible: %+v", m)
	}
	for _, f := range append(l.StateFiles(), l.Session("work")) {
		if m, ok := find(p, f); !ok || m.Mode != Hidden {
			t.Errorf("%s shows in a run that may read the data dir: %+v (found %v)", f, m, ok)
		}
	}
	for _, own := range []string{string(l.IPC("family")), l.Session("family")} {
		if m, ok := find(p, own); !ok || m.Mode != ReadWrite {
			t.Errorf("the group's own %s: %+v (found %v), want read-write", own, m, ok)
		}
	}
}

// The sandbox's first process is the small nanoclawd-init beside the
// daemon's binary when there is one (bound into the sandbox read-only),
// else the daemon's own binary with sandbox-init.
func TestInitProgram(t *testing.T) {
	root, in := world(t)
	p := New(in)
	if want := []string{in.Binary, "sandbox-init"}; !slices.Equal(p.Init, want) {
		t.Fatalf("without nanoclawd-init: %q, want %q", p.Init, want)
	}
	small := filepath.Join(root, "bin/nanoclawd-init")
	if err := os.WriteFile(small, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p := New(in); p.Init[0] != in.Binary {
		t.Errorf("a nanoclawd-init that is not executable was used: %q", p.Init)
	}
	if err := os.Chmod(small, 0o755); err != nil {
		t.Fatal(err)
	}
	p = New(in)
	if !slices.Equal(p.Init, []string{small}) {
		t.Fatalf("with nanoclawd-init: %q, want %q", p.Init, small)
	}
	if !slices.ContainsFunc(p.Mounts, func(m Mount) bool { return m.Path == small && m.Mode == ReadOnly }) {
		t.Errorf("nanoclawd-init is not bound into the sandbox: %+v", p.Mounts)
	}
	if args := InitArgs(p, []string{"agent"}); args[0] != small || args[1] != "--lifeline" || args[len(args)-1] != "agent" {
		t.Errorf("InitArgs = %q", args)
	}
}

// nanoclawd and nanoclawd-init in the directory of the agent's program
// (bin/node beside them) are seen through that directory's mount, not
// mounted again; through a link they keep a mount of their own.
func TestBinaryInTheAgentsDirectory(t *testing.T) {
	root, in := world(t)
	small := filepath.Join(root, "bin/nanoclawd-init")
	if err := os.WriteFile(small, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	program := filepath.Join(root, "bin/node")
	if err := os.WriteFile(program, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	in.Command = []string{program}
	p := New(in)
	if m, ok := find(p, filepath.Join(root, "bin")); !ok || m.Mode != ReadOnly {
		t.Fatalf("the program's directory: %+v (found %v)", m, ok)
	}
	for _, f := range []string{in.Binary, small} {
		if m, ok := find(p, f); ok {
			t.Errorf("%s is mounted again inside bin/: %+v", f, m)
		}
	}
	elsewhere := filepath.Join(root, "opt/nanoclawd")
	os.MkdirAll(filepath.Dir(elsewhere), 0o755)
	os.Rename(in.Binary, elsewhere)
	if err := os.Symlink(elsewhere, in.Binary); err != nil {
		t.Fatal(err)
	}
	if m, ok := find(New(in), in.Binary); !ok || m.Mode != ReadOnly {
		t.Errorf("nanoclawd as a link in bin/ to %s: %+v (found %v)", elsewhere, m, ok)
	}
}
