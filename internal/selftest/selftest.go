// Package selftest is `nanoclawd security test`: it proves the
// confinement on the machine it runs on. It builds the sandbox a non-main
// run gets (confine.New: the same plan, gateway and command line) around
// a probe (`nanoclawd sandbox-probe`, probe.go) that attacks it, against
// canaries it plants and listeners it opens, and reports each boundary as
// held or BROKEN with what was reached. What it planted is removed again.
package selftest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Boundaries are what the test proves, in the order it reports them. The
// kernel's (system calls the seccomp filter refuses) are Linux's.
var Boundaries = boundaries()

// kernelBoundaries map each Linux-only boundary to the probe's calls.
var kernelBoundaries = []struct {
	name  string
	calls []string
}{
	{"ioctl", []string{"ioctl TIOCSTI|1<<32"}},
	{"personality", []string{"personality ADDR_NO_RANDOMIZE"}},
	{"sockets", []string{"socket AF_VSOCK", "socket AF_PACKET", "socket AF_NETLINK audit"}},
	{"shm", []string{"shmget", "msgget"}},
}

func boundaries() []string {
	out := []string{"home", "data", "groups", "write", "loopback", "network", "relay", "namespace", "setuid", "denyread", "hooks"}
	if runtime.GOOS == "linux" {
		for _, k := range kernelBoundaries {
			out = append(out, k.name)
		}
	}
	return out
}

// Result is one boundary's verdict.
type Result struct {
	Boundary string `json:"boundary"`
	Status   string `json:"status"` // "held" or "BROKEN"
	Detail   string `json:"detail"`
}

// Held tells whether the boundary held.
func (r Result) Held() bool { return r.Status == "held" }

// Report is the whole verdict.
type Report struct {
	OS         string   `json:"os"`
	OK         bool     `json:"ok"`
	Boundaries []Result `json:"boundaries"`
	// Weaker is what this OS's confinement lacks against Linux's
	// (sandbox.Weaker), one line each; none on Linux.
	Weaker []string `json:"weaker,omitempty"`
}

// Broken lists the boundaries that did not hold, but those in except.
func (r Report) Broken(except []string) []Result {
	var out []Result
	for _, b := range r.Boundaries {
		if !b.Held() && !slices.Contains(except, b.Boundary) {
			out = append(out, b)
		}
	}
	return out
}

// Options say where to test.
type Options struct {
	Config *config.Config
	Binary string // this nanoclawd: sandbox-init and the probe
	Home   string // the owner's home ("" = this user's)
	// Weaken loosens the policy for one boundary, the way an operator
	// could, so that a test sees the report name it (WeakenEnv).
	Weaken string
}

// WeakenEnv, set to a boundary's name, makes `security test` loosen that
// boundary (home, data, groups, write, loopback or network): a way to see
// it report a broken one.
const WeakenEnv = "NANOCLAWD_SECURITY_TEST_WEAKEN"

// Run proves the confinement and cleans up after itself. An error means
// the test itself could not be made (no sandbox here, the probe did not
// run): nothing is proven then.
func Run(ctx context.Context, o Options) (Report, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cfg := o.Config
	if o.Weaken != "" {
		// A read or write the policy lets through is still stopped by the
		// run user's file permissions when the daemon is root: runs as the
		// daemon's own user, so the loosened rule is all that stands.
		weak := *cfg
		weak.Agent.RunAs = config.RunAs{UID: os.Geteuid(), GID: os.Getegid()}
		cfg = &weak
	}
	if o.Home == "" {
		o.Home, _ = os.UserHomeDir()
	}
	id := randID()
	secret := "nanoclawd-canary-" + id
	l := cfg.Layout()
	s := &scene{secret: secret}
	defer s.cleanup()

	// The run's own group, and another group with notes of its own.
	probe, other := "selftest-"+id, "selftest-other-"+id
	for _, d := range []string{l.Group(probe), l.Session(probe), string(l.IPC(probe)), l.Group(other)} {
		if err := s.mkdir(d); err != nil {
			return Report{}, err
		}
	}
	canaries := map[string]string{
		"home":   filepath.Join(o.Home, ".nanoclawd-selftest-"+id),
		"data":   filepath.Join(cfg.DataDir, "selftest-"+id),
		"groups": filepath.Join(l.Group(other), "notes.md"),
	}
	for _, p := range canaries {
		if err := s.plant(p); err != nil {
			return Report{}, err
		}
	}
	writes := []string{filepath.Join(cfg.DataDir, "selftest-write-"+id), filepath.Join(o.Home, ".nanoclawd-selftest-write-"+id),
		filepath.Join(l.Group(other), "written-"+id), filepath.Join(filepath.Dir(cfg.File), ".nanoclawd-selftest-write-"+id)}
	s.remove = append(s.remove, writes...)
	setuidFile := filepath.Join(l.Group(probe), "setuid-"+id)
	// In the run's own folder: a file a "**/" denyRead rule hides, and a
	// repository whose core.hooksPath points inside the folder.
	own := l.Group(probe)
	ownSecret := filepath.Join(own, "app", ".env")
	if err := s.mkdir(filepath.Dir(ownSecret)); err != nil {
		return Report{}, err
	}
	if err := s.plant(ownSecret); err != nil {
		return Report{}, err
	}
	for _, d := range []string{filepath.Join(own, ".git"), filepath.Join(own, "tools")} {
		if err := s.mkdir(d); err != nil {
			return Report{}, err
		}
	}
	gitConfig := filepath.Join(own, ".git", "config")
	if err := os.WriteFile(gitConfig, []byte("[core]\n\thooksPath = tools/hooks\n"), 0o644); err != nil {
		return Report{}, fmt.Errorf("plant %s: %w", gitConfig, err)
	}
	s.remove = append(s.remove, gitConfig)
	hooks := []string{filepath.Join(own, ".githooks", "pre-commit"), filepath.Join(own, ".husky", "pre-commit"), filepath.Join(own, "tools", "hooks", "pre-commit")}

	// What the network probes aim at: a listener on the host's loopback,
	// one on an address of the host that is not loopback (offline it
	// stands in for the network beyond), and the model API's stand-in.
	loop, err := s.listen("127.0.0.1:0")
	if err != nil {
		return Report{}, err
	}
	var lan *listener
	if a := hostAddr(); a != "" {
		if lan, err = s.listen(net.JoinHostPort(a, "0")); err != nil {
			return Report{}, err
		}
	}
	up, err := s.upstream()
	if err != nil {
		return Report{}, err
	}

	// The policy: the global one, with "*" as the network (the widest an
	// operator writes), as for a group without an override, and a name
	// allowed on the loopback listener's port: the gateway must refuse it
	// for where it leads.
	_, loopPort, _ := net.SplitHostPort(loop.addr)
	global := cfg.HostSecurity
	global.Network = &security.Network{AllowedDomains: []string{"*", "localhost:" + loopPort}}
	folders := []string{probe, other}
	switch o.Weaken {
	case "":
	case "home":
		global.AllowRead = append(slices.Clone(global.AllowRead), o.Home)
	case "data":
		global.AllowRead = append(slices.Clone(global.AllowRead), cfg.DataDir)
	case "groups":
		folders = []string{probe} // as if the other group were not registered
		global.AllowRead = append(slices.Clone(global.AllowRead), l.Group(other))
	case "write":
		global.AllowWrite = append(slices.Clone(global.AllowWrite), cfg.DataDir)
	case "loopback":
		global.Network.AllowedDomains = append(global.Network.AllowedDomains, loop.addr)
	case "network":
		if lan == nil {
			return Report{}, errors.New("no address of this host besides loopback to weaken the network boundary with")
		}
		global.Network.AllowedDomains = append(global.Network.AllowedDomains, lan.addr)
	default:
		return Report{}, fmt.Errorf("%s=%q: weaken one of home, data, groups, write, loopback, network", WeakenEnv, o.Weaken)
	}
	global.DenyRead = append(slices.Clone(global.DenyRead), "**/.env")
	eff := security.Resolve(global, security.Group{Folder: probe}, cfg.SecurityHost(folders))

	task := Task{Secret: secret, Read: []string{canaries["home"], canaries["data"], canaries["groups"], ownSecret}, Write: writes,
		Hooks: hooks, Calls: runtime.GOOS == "linux",
		Dial: []string{loop.addr}, Tunnel: []string{loop.addr, "localhost:" + loopPort}, Get: []string{"http://" + loop.addr + "/", "http://localhost:" + loopPort + "/"},
		Relay:  []string{"POST /v1/messages?beta=true", "GET /v1/files", "DELETE /v1/files/file_x", "POST /v1/messages/batches", "GET /v1/models"},
		Setuid: setuidFile}
	if lan != nil {
		task.Dial = append(task.Dial, lan.addr)
		task.Tunnel = append(task.Tunnel, lan.addr)
		task.Get = append(task.Get, "http://"+lan.addr+"/")
	}
	found, err := s.probe(ctx, o, cfg, eff, up, task)
	if err != nil {
		return Report{}, err
	}
	rep := Report{OS: runtime.GOOS, OK: true, Weaker: sandbox.Weaker(runtime.GOOS)}
	verdict := func(name, broken string) {
		r := Result{Boundary: name, Status: "held"}
		if broken != "" {
			r.Status, r.Detail = "BROKEN", broken
			rep.OK = false
		}
		rep.Boundaries = append(rep.Boundaries, r)
	}
	for _, name := range []string{"home", "data", "groups"} {
		verdict(name, reachedOf(found, "read", canaries[name], "read "+canaries[name]))
	}
	var wrote []string
	for _, p := range writes {
		if _, err := os.Lstat(p); err == nil {
			wrote = append(wrote, p)
		}
	}
	verdict("write", joinIf("wrote ", wrote))
	verdict("loopback", s.network(found, loop, "the host's loopback"))
	beyond := ""
	if lan != nil {
		beyond = s.network(found, lan, "an address of the host")
	}
	if runtime.GOOS == "linux" { // macOS runs share the host's interfaces; the profile is the boundary there
		if f := find(found, "interfaces", ""); f != nil && f.Reached {
			beyond = strings.TrimPrefix(beyond+"; the run has network interfaces: "+f.Detail, "; ")
		}
	}
	verdict("network", beyond)
	verdict("relay", up.verdict(found))
	verdict("namespace", reachedOf(found, "namespace", "", ""))
	verdict("setuid", setuidVerdict(setuidFile, found))
	verdict("denyread", reachedOf(found, "read", ownSecret, "read "+ownSecret))
	var hooked []string
	for _, h := range hooks {
		if why := reachedOf(found, "hook", h, "wrote "+h); why != "" {
			hooked = append(hooked, why)
		}
	}
	verdict("hooks", strings.Join(hooked, "; "))
	if runtime.GOOS == "linux" {
		for _, k := range kernelBoundaries {
			var open []string
			for _, c := range k.calls {
				if why := reachedOf(found, "call", c, c+" was let through"); why != "" {
					open = append(open, why)
				}
			}
			verdict(k.name, strings.Join(open, "; "))
		}
		if last := &rep.Boundaries[len(rep.Boundaries)-1]; last.Boundary == "shm" && last.Held() {
			last.Detail = memoryNote()
		}
	}
	return rep, nil
}

// memoryNote says how the shared memory a run may still make (memfds) is
// bounded here, and what is not counted where the OS cannot bound it.
func memoryNote() string {
	if _, err := sandbox.MemoryCgroup(); err == nil {
		return "memfds count against each run's memory cgroup"
	}
	return "no memory cgroup here: memfds a run holds open or mapped are counted by the daemon's watch; one passed into a Unix socket and closed is not"
}
