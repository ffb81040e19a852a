// Package sandbox builds the OS confinement of one non-main agent run: an
// allow-list of what the run may see, enforced by the kernel. On Linux the
// plan becomes a bubblewrap command line (new user, mount, PID, IPC, UTS and
// network namespaces); on macOS a Seatbelt (sandbox-exec) profile. Inside,
// `nanoclawd sandbox-init` is the first process: it sets the run's limits,
// offers the daemon's egress gateway on 127.0.0.1 and starts the agent.
//
// Everything the run may see is named here, read-only or read-write; what
// is not named does not exist inside. denyRead cuts paths back out of what
// is named, so an allowRead of the home does not open ~/.ssh.
package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// whySystem is the reason of the system runtime's mounts.
const whySystem = "system runtime"

// Mount modes.
const (
	ReadOnly  = "ro"
	ReadWrite = "rw"
	Hidden    = "hidden" // cut out of a visible tree: an empty read-only directory or file
	Private   = "tmpfs"  // an empty directory of the run's own (/tmp)
)

// Mount is one path the run sees.
type Mount struct {
	Path string `json:"path"`
	Mode string `json:"mode"`
	Why  string `json:"why"`
	// Link is the target when Path is a symbolic link (recreated inside).
	Link string `json:"link,omitempty"`
	// Dir tells whether Path is (or, when absent, stands for) a directory.
	Dir bool `json:"-"`
	// Missing: Path did not exist; the mount creates an empty placeholder
	// on the host, which Cleanup removes after the run.
	Missing bool `json:"-"`
}

// Limits bound one run. Zero means no limit.
type Limits struct {
	Processes int   `json:"processes"`     // RLIMIT_NPROC inside the run's user namespace
	FileSize  int64 `json:"fileSizeBytes"` // RLIMIT_FSIZE: the largest file one write may make
	TmpSize   int64 `json:"tmpBytes"`      // size of the private /tmp
	ShmSize   int64 `json:"shmBytes"`      // size of /dev/shm (its pages count as no process's resident memory)
	Memory    int64 `json:"memoryBytes"`   // resident memory of all the run's processes, measured (Watch)
	Disk      int64 `json:"diskBytes"`     // files in the group's folder but its logs/, measured (Watch)
}

// GatewayAddr is where the daemon's egress gateway appears inside the
// sandbox: the forward proxy and the model-API relay share it.
const GatewayAddr = "127.0.0.1:3128"

// Plan is the confinement of one run, as `security show` prints it.
type Plan struct {
	Mounts  []Mount `json:"mounts"`
	Network string  `json:"network"`
	Gateway string  `json:"gateway"`
	Limits  Limits  `json:"limits"`
	// Argv is agent.command with its program resolved in the daemon's PATH.
	Argv []string `json:"command"`
	// Workdir is the group's folder, the run's working directory.
	Workdir string `json:"workdir"`
	// Socket is the host path of the run's gateway socket, bound in at
	// the same path; sandbox-init serves it on Listen.
	Socket string `json:"socket,omitempty"`
	// Profile is the macOS Seatbelt profile (set on macOS only).
	Profile string `json:"profile,omitempty"`
	// RunAs is the host user of the run's processes; Seccomp names the
	// filter on its system calls.
	RunAs   User   `json:"runAs"`
	Seccomp string `json:"seccomp"`
	// Problems are paths the run, as RunAs, could not use as planned
	// (security show and doctor print them with the fix).
	Problems []Problem `json:"problems,omitempty"`
	// Listen is the gateway's address inside the run (see Listen()); on
	// macOS the only port its profile allows.
	Listen string `json:"listen"`
	// Init starts the sandbox's first process (InitProgram).
	Init []string `json:"-"`
	// Unchecked are the trees a run can write whose walk for cut-outs
	// (denyRead globs, nested protected names) ran out of entries: their
	// cut-outs could not all be found, so no run is started (Command).
	Unchecked []string `json:"unchecked,omitempty"`
	// partial are the read-only trees whose walk ran out (listed as
	// Problems): a group cannot add to those.
	partial []string
}

// Input is what a plan is made from. Paths are absolute.
type Input struct {
	Command    []string // agent.command, Command[0] resolved to a path
	Binary     string   // this nanoclawd
	GroupDir   string
	SessionDir string
	IPCDir     string
	Socket     string   // the run's gateway socket ("" in `security show`)
	AllowRead  []string // hostSecurity.allowRead, expanded
	AllowWrite []string // hostSecurity.allowWrite, expanded (the group's folder may be among them)
	// DenyRead is what is cut out wherever an allowed path would show it:
	// hostSecurity.denyRead expanded ("**/name" globs are looked for inside
	// allowed trees), the daemon's own files (layout.StateFiles), other
	// groups' folders, sessions and IPC.
	DenyRead []string
	Limits   Limits
}

// System is the read-only runtime every run sees: programs and libraries,
// and the few files of /etc they need (not /etc itself).
var System = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/hosts", "/etc/localtime", "/etc/timezone",
	"/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies", "/etc/mime.types",
}

// Protected are the names in a group's folder that run code or change the
// agent's own rules when someone else (the owner, git, an editor, the next
// run) touches the folder: the group may read them, never create or change
// them. Only the owner creates them. A whole .git is read-only (and, being
// a mount point, cannot be renamed away to make a new one).
var Protected = []struct {
	Name string
	Dir  bool
}{
	{".git", true}, {".envrc", false}, {".vscode", true}, {".idea", true},
	{".claude", true}, {".mcp.json", false}, {layout.LogsDir, true},
	{".githooks", true}, {".husky", true}, // where hook managers keep the hooks core.hooksPath points git at
}

// ProtectedAnywhere are the protected names that act wherever they are in
// the folder (a nested repository, a direnv file, an editor's workspace
// settings): those that exist deeper down are read-only too. A run cannot
// be kept from making new ones deeper down; when the daemon runs as root
// they are the run user's, which git (safe.directory) refuses to act on
// for anyone else.
var ProtectedAnywhere = []string{".git", ".envrc", ".vscode", ".idea", ".githooks", ".husky"}

// New makes the plan for one run. It looks at the file system (what
// exists, what is a link) but changes nothing.
func New(in Input) Plan {
	p := Plan{
		Network: "none but the gateway",
		Gateway: "http://" + GatewayAddr + " (HTTP(S) proxy applying network.allowedDomains, and the model-API relay)",
		Limits:  in.Limits,
		Argv:    in.Command,
		Workdir: in.GroupDir,
		Socket:  in.Socket,
	}
	add := func(path, mode, why string) {
		if path == "" || slices.ContainsFunc(p.Mounts, func(m Mount) bool { return m.Path == path && m.Mode == mode }) {
			return
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return
		}
		m := Mount{Path: path, Mode: mode, Why: why, Dir: fi.IsDir()}
		if fi.Mode()&fs.ModeSymlink != 0 {
			m.Link, _ = os.Readlink(path)
			if st, err := os.Stat(path); err == nil {
				m.Dir = st.IsDir()
			}
		}
		p.Mounts = append(p.Mounts, m)
	}

	// readOnly adds a read-only tree, unless one added before holds it
	// already: only read-only trees come before these, so the mount
	// would show the same files, and each mount costs bubblewrap a pass
	// over the mount table at every start (nanoclawd and nanoclawd-init
	// lie in the directory of agent.command's node or program).
	readOnly := func(path, why string) {
		if !inReadOnlyTree(p.Mounts, path) {
			add(path, ReadOnly, why)
		}
	}
	p.Mounts = append(p.Mounts, Mount{Path: "/tmp", Mode: Private, Why: "private /tmp", Dir: true})
	for _, s := range System {
		add(s, ReadOnly, whySystem)
	}
	for _, f := range commandFiles(in.Command) {
		// Homebrew's /usr/local is inside /usr, but the macOS profile
		// grants it only for the agent command's own files.
		if !under(f, System) || under(f, homebrewPrefixes) {
			readOnly(f, "agent.command")
		}
	}
	readOnly(in.Binary, "nanoclawd (MCP server)")
	if p.Init = InitProgram(in.Binary); len(p.Init) == 1 {
		readOnly(p.Init[0], "nanoclawd-init (the sandbox's first process)")
	}
	for _, r := range in.AllowRead {
		readOnly(r, "allowRead")
	}
	// Read-only trees first, then what is cut out of them, then the
	// writable dirs (which may lie inside a cut-out: the group's own IPC
	// dir under the data dir), then what is cut out of those. A later
	// mount covers an earlier one (bubblewrap's mounts, and Seatbelt's
	// last matching rule), so a cut-out a writable tree would cover is
	// made again after it.
	writable := append([]string{in.GroupDir, in.SessionDir, in.IPCDir}, in.AllowWrite...)
	p.hide(in, roots(p.Mounts), writable, 0)
	n := len(p.Mounts)
	// The run's own dirs are made before it starts; `security show` lists
	// them before they exist.
	own := []struct{ path, why string }{
		{in.GroupDir, "the group's folder"}, {in.SessionDir, "the group's agent session"}, {in.IPCDir, "the group's IPC directory"},
	}
	for _, d := range own {
		if add(d.path, ReadWrite, d.why); !slices.ContainsFunc(p.Mounts, func(m Mount) bool { return m.Path == d.path }) {
			p.Mounts = append(p.Mounts, Mount{Path: d.path, Mode: ReadWrite, Why: d.why, Dir: true})
		}
	}
	for _, w := range in.AllowWrite {
		add(w, ReadWrite, "allowWrite")
	}
	add(in.Socket, ReadWrite, "the egress gateway")
	cut := len(p.Mounts)
	p.hide(in, roots(p.Mounts[n:cut]), writable, n)
	// A cut-out of an allowWrite tree (the data dir's IPC root) may hold
	// one of the run's own dirs or its socket: they come back over it.
	var cutOuts []string
	for _, m := range p.Mounts[cut:] {
		cutOuts = append(cutOuts, m.Path)
	}
	for _, d := range append(own, struct{ path, why string }{in.Socket, "the egress gateway"}) {
		if i := slices.IndexFunc(p.Mounts, func(m Mount) bool { return m.Path == d.path && m.Mode == ReadWrite }); i >= 0 && under(d.path, cutOuts) {
			p.Mounts = append(p.Mounts, p.Mounts[i])
		}
	}
	for _, pr := range Protected {
		path := filepath.Join(in.GroupDir, pr.Name)
		fi, err := os.Lstat(path)
		exists := err == nil && !placeholder(path, fi) // an empty one was left by a run the daemon could not tidy up after
		if exists {
			add(path, ReadOnly, "protected: only the owner changes it")
		} else {
			p.Mounts = append(p.Mounts, Mount{Path: path, Mode: ReadOnly, Why: "protected: only the owner creates it", Dir: pr.Dir, Missing: true})
		}
	}
	nested, complete := findNames(in.GroupDir, ProtectedAnywhere, nil)
	if !complete {
		p.Unchecked = append(p.Unchecked, in.GroupDir)
	}
	for _, f := range nested {
		if filepath.Dir(f) != in.GroupDir {
			add(f, ReadOnly, "protected: only the owner changes it")
		}
	}
	var gits []string
	for _, f := range nested {
		if filepath.Base(f) == ".git" {
			gits = append(gits, f)
		}
	}
	for _, d := range hookDirs(in.GroupDir, gits) {
		if _, err := os.Lstat(d); err == nil {
			add(d, ReadOnly, "protected: git runs the hooks there (core.hooksPath)")
		} else if !slices.ContainsFunc(p.Mounts, func(m Mount) bool { return m.Path == d }) {
			p.Mounts = append(p.Mounts, Mount{Path: d, Mode: ReadOnly, Why: "protected: git would run hooks from there (core.hooksPath)", Dir: true, Missing: true})
		}
	}
	return p
}

// inReadOnlyTree tells whether path lies inside a read-only directory
// among mounts, with no link on the way (a link's target may lie
// elsewhere, which only a mount of its own shows). The system runtime's
// trees do not count: the macOS profile grants Homebrew's /usr/local
// only for the agent command's own files.
func inReadOnlyTree(mounts []Mount, path string) bool {
	inside := slices.ContainsFunc(mounts, func(m Mount) bool {
		return m.Mode == ReadOnly && m.Dir && m.Link == "" && !m.Missing && m.Why != whySystem &&
			m.Path != path && under(path, []string{m.Path})
	})
	if !inside {
		return false
	}
	real, err := filepath.EvalSymlinks(path)
	return err == nil && real == path
}

// hide adds a Hidden mount for every denied path that would show inside
// one of roots, unless p.Mounts[since:] cuts it out already; "**/name"
// globs apply in the run's own folder too. A walk of a read-only tree
// passes over the writable trees inside it (walked on their own), so what
// a group writes never uses up that walk.
func (p *Plan) hide(in Input, roots, writable []string, since int) {
	var globs, literal []string
	for _, d := range in.DenyRead {
		if name, ok := strings.CutPrefix(d, "**/"); ok {
			globs = append(globs, name)
		} else if !strings.ContainsAny(d, "*?[") {
			literal = append(literal, d)
		}
	}
	own := []string{in.GroupDir, in.SessionDir, in.IPCDir}
	for _, d := range literal {
		if slices.Contains(own, d) || !under(d, roots) {
			continue
		}
		p.hideOne(d, since)
	}
	for _, root := range roots {
		if under(root, System) || len(globs) == 0 {
			continue
		}
		found, complete := findNames(root, globs, writable)
		switch {
		case complete:
		case under(root, writable):
			p.Unchecked = append(p.Unchecked, root)
		default:
			p.partial = append(p.partial, root)
		}
		for _, f := range found {
			p.hideOne(f, since)
		}
	}
}

// dropUnreachableCutOuts leaves out each cut-out (denyRead) that the run's
// user u cannot reach anyway — a directory on its way that u may not pass
// (a file of another user's in a shared tree): the permissions already
// keep u from it, and bubblewrap, started as u, could not make its mount
// point, so the whole run would fail.
//
// A cut-out inside a tree the run writes is never left out: the run could
// have made its way there unpassable itself (chmod 000) to shed the
// cut-out and open it again once started. Such a run fails to start
// instead.
func (p *Plan) dropUnreachableCutOuts(u User) {
	if !u.Switches() {
		return
	}
	var writable []string
	for _, m := range p.Mounts {
		if m.Mode == ReadWrite {
			writable = append(writable, m.Path)
		}
	}
	p.Mounts = slices.DeleteFunc(p.Mounts, func(m Mount) bool {
		return m.Mode == Hidden && !under(m.Path, writable) && reach(m.Path, u) != ""
	})
}

func (p *Plan) hideOne(path string, since int) {
	fi, err := os.Lstat(path)
	if err != nil || slices.ContainsFunc(p.Mounts[since:], func(m Mount) bool { return m.Path == path && m.Mode == Hidden }) {
		return
	}
	p.Mounts = append(p.Mounts, Mount{Path: path, Mode: Hidden, Why: "denyRead", Dir: fi.IsDir()})
}

// placeholder tells whether fi looks like what a run's sandbox leaves
// where a protected name did not exist (an empty file or directory), after
// the daemon was killed before it could tidy up: it is made and removed
// again like a missing one.
func placeholder(path string, fi fs.FileInfo) bool {
	if fi.Mode().IsRegular() {
		return fi.Size() == 0
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(path)
		return err == nil && len(entries) == 0
	}
	return false
}

// commandFiles is the program and every argument that is an existing file,
// each with the directory of its package (the nearest parent holding a
// package.json or go.mod, at most two levels up), so a node script finds
// its node_modules.
func commandFiles(command []string) []string {
	var out []string
	for i, a := range command {
		if !filepath.IsAbs(a) {
			if i == 0 {
				continue // not found in PATH: the start fails and says so
			}
			abs, err := filepath.Abs(a)
			if err != nil {
				continue
			}
			a = abs
		}
		fi, err := os.Stat(a)
		if err != nil || fi.IsDir() {
			continue
		}
		dir := filepath.Dir(a)
		if i > 0 {
			for up, d := 0, dir; up <= 2 && d != "/"; up, d = up+1, filepath.Dir(d) {
				if exists(filepath.Join(d, "package.json")) || exists(filepath.Join(d, "go.mod")) {
					dir = d
					break
				}
			}
		}
		out = append(out, dir)
		if real, err := filepath.EvalSymlinks(a); err == nil && filepath.Dir(real) != filepath.Dir(a) {
			out = append(out, filepath.Dir(real))
		}
	}
	return out
}

// lookPath finds a program named without a path as the sandbox will see
// it: in the system runtime when PATH has it there (a version manager's
// shim earlier in PATH, such as pyenv's, needs its whole tree), else the
// first in PATH, whose directory the plan then binds.
func lookPath(name string) string {
	if strings.Contains(name, "/") {
		if abs, err := filepath.Abs(name); err == nil {
			return abs
		}
		return name
	}
	first := ""
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			continue
		}
		if under(p, System) {
			return p
		}
		if first == "" {
			first = p
		}
	}
	if first == "" {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		return name
	}
	return first
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// roots are the visible trees among ms (the private /tmp holds nothing
// of the host's).
func roots(ms []Mount) []string {
	var out []string
	for _, m := range ms {
		if m.Mode == ReadOnly || m.Mode == ReadWrite {
			out = append(out, m.Path)
		}
	}
	return out
}

// under tells whether p is one of roots or below one.
func under(p string, roots []string) bool {
	for _, r := range roots {
		if p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/") {
			return true
		}
	}
	return false
}

// ForGroup is the plan of one run of a group whose resolved policy is eff,
// as the router builds it and `security show` prints it.
func ForGroup(eff security.Effective, l Limits, u User, command []string, binary, groupDir, sessionDir, ipcDir, socket string) Plan {
	cmd := slices.Clone(command)
	if len(cmd) > 0 {
		cmd[0] = lookPath(cmd[0])
	}
	p := New(Input{
		Command: cmd, Binary: binary, GroupDir: groupDir, SessionDir: sessionDir, IPCDir: ipcDir, Socket: socket,
		AllowRead: eff.AllowRead, AllowWrite: eff.AllowWrite, DenyRead: eff.DenyRead, Limits: l,
	})
	p.RunAs, p.Seccomp = u, SeccompPolicy
	p.dropUnreachableCutOuts(u)
	p.Listen = GatewayAddr
	if runtime.GOOS == "darwin" {
		p.Profile = Profile(p)
	}
	p.Problems = p.check(u)
	for _, root := range p.partial {
		p.Problems = append(p.Problems, Problem{root, fmt.Sprintf("holds more than %d entries: denyRead \"**/\" rules are not looked for past them; narrow allowRead", maxWalk)})
	}
	if len(p.Unchecked) > 0 {
		p.Problems = append(p.Problems, Problem{p.Unchecked[0], uncheckedError(p).Error()})
	}
	return p
}
