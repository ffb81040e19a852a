package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrUnavailable is returned (wrapped) when no sandbox can be built here:
// a non-main run then fails closed, it never runs unconfined.
var ErrUnavailable = errors.New("the agent sandbox cannot be built")

// User is a host user and group.
type User struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// DefaultRunID is the default host uid and gid of confined runs when the
// daemon runs as root: high enough that no system or login user has it,
// so no account needs to be made for it.
const DefaultRunID = 64055

// RunUser is who a confined run is on the host: the configured user when
// the daemon runs as root (bubblewrap started by root maps the sandbox's
// user to root, so it is started as this user instead: a run is never
// root, never the owner), else the daemon's own user, the only one an
// unprivileged process can start anything as.
func RunUser(configured User) User {
	if os.Geteuid() == 0 {
		return configured
	}
	return User{UID: os.Getuid(), GID: os.Getgid()}
}

// Switches tells whether runs start as another user than the daemon's.
func (u User) Switches() bool { return u.UID != os.Geteuid() || u.GID != os.Getegid() }

// FirstFD is the first descriptor a confined run's Launch.Files get:
// fd 3 is the runner's lifeline.
const FirstFD = 4

// Launch is how the daemon starts one confined run.
type Launch struct {
	Argv  []string   // bwrap and its arguments
	Files []*os.File // handed over as fds FirstFD, FirstFD+1, …: the seccomp filter
	User  User       // the host user bwrap is started as
}

// Credential is what the process is started as: nil for the daemon's own user.
func (l Launch) Credential() *syscall.Credential {
	if !l.User.Switches() {
		return nil
	}
	return &syscall.Credential{Uid: uint32(l.User.UID), Gid: uint32(l.User.GID), Groups: []uint32{}}
}

// Close closes the files once the run has started (it holds its own copies).
func (l Launch) Close() {
	for _, f := range l.Files {
		f.Close()
	}
}

// BwrapArgs is the bubblewrap command line (without the program name) that
// runs argv confined by p as u, the seccomp filter read from seccompFD
// (none if 0). Later mounts cover earlier ones, so the order is the plan's:
// private /tmp, read-only trees, cut-outs, writable dirs, cut-outs of
// those, protected names; the cut-outs and /dev are made read-only last (a
// writable dir may sit inside one; /dev/shm stays writable, bounded).
func BwrapArgs(p Plan, u User, seccompFD int, argv []string) []string {
	uid, gid := strconv.Itoa(u.UID), strconv.Itoa(u.GID)
	a := []string{
		"--die-with-parent", "--new-session",
		"--unshare-user", "--disable-userns", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
		"--uid", uid, "--gid", gid, "--hostname", "nanoclaw",
		"--cap-drop", "ALL",
		"--proc", "/proc", "--dev", "/dev",
	}
	if p.Limits.ShmSize > 0 {
		a = append(a, "--size", strconv.FormatInt(p.Limits.ShmSize, 10))
	}
	a = append(a, "--tmpfs", "/dev/shm")
	if seccompFD > 0 {
		a = append(a, "--seccomp", strconv.Itoa(seccompFD))
	}
	readOnly := []string{"/dev"}
	for _, m := range p.Mounts {
		switch {
		case m.Mode == Private:
			if p.Limits.TmpSize > 0 {
				a = append(a, "--size", strconv.FormatInt(p.Limits.TmpSize, 10))
			}
			a = append(a, "--tmpfs", m.Path)
		case m.Link != "" && m.Mode == ReadOnly:
			a = append(a, "--symlink", m.Link, m.Path)
		case m.Mode == ReadOnly && !m.Missing:
			a = append(a, "--ro-bind", m.Path, m.Path)
		case m.Mode == ReadWrite:
			a = append(a, "--bind", m.Path, m.Path)
		case m.Dir: // hidden, or a protected directory that does not exist
			a = append(a, "--perms", "0555", "--tmpfs", m.Path)
			readOnly = append(readOnly, m.Path)
		default: // a hidden or missing protected file
			a = append(a, "--ro-bind", "/dev/null", m.Path)
		}
	}
	for _, d := range readOnly {
		a = append(a, "--remount-ro", d)
	}
	a = append(a, "--chdir", p.Workdir, "--")
	return append(a, argv...)
}

// InitProgram is how the sandbox's first process is started: the small
// nanoclawd-init built beside binary, when it is there, else `binary
// sandbox-init`. Both run sandboxinit.Main; the small one is running in a few
// milliseconds, where the whole nanoclawd spends tens initialising
// packages a sandbox never uses (WhatsApp's protocol, the validator, …),
// on every confined start.
func InitProgram(binary string) []string {
	if binary == "" {
		return nil
	}
	if small := binary + "-init"; executable(small) {
		return []string{small}
	}
	return []string{binary, "sandbox-init"}
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// InitArgs is the command line of the sandbox's first process (sandboxinit.Main,
// started as p.Init) that starts command inside the sandbox.
func InitArgs(p Plan, command []string) []string {
	a := append(slices.Clone(p.Init), "--lifeline", "3",
		"--nproc", strconv.Itoa(p.Limits.Processes),
		"--fsize", strconv.FormatInt(p.Limits.FileSize, 10))
	if p.Socket != "" {
		a = append(a, "--gateway", p.Socket, "--listen", cmp.Or(p.Listen, GatewayAddr))
	}
	return append(append(a, "--"), command...)
}

// Command is the whole confined command line for this OS, run as u.
func Command(p Plan, u User, command []string) (Launch, error) {
	if len(p.Unchecked) > 0 {
		return Launch{}, uncheckedError(p)
	}
	inner := InitArgs(p, command)
	switch runtime.GOOS {
	case "linux":
		// The first process is the PID namespace's pid 1, not
		// bubblewrap's own: when it leaves, the kernel ends every process
		// of the run before bubblewrap exits, so the daemon, waiting for
		// bubblewrap, waits for them all. (bubblewrap's pid 1 waits for
		// its last child, and one that escaped outlived the run.)
		l, err := bwrapLaunch(p, u, FirstFD, inner)
		if err == nil {
			l.Argv = slices.Insert(l.Argv, 1, "--as-pid-1")
		}
		return l, err
	case "darwin":
		// No network namespace: each run has a loopback port of its own
		// (Plan.Listen), the only one its profile lets it reach.
		return Launch{Argv: append([]string{"/usr/bin/sandbox-exec", "-p", Profile(p)}, inner...), User: u}, nil
	}
	return Launch{}, fmt.Errorf("%w: no sandbox for %s (only Linux with bubblewrap and macOS)", ErrUnavailable, runtime.GOOS)
}

// bwrapLaunch runs argv in bubblewrap as p plans, as u, under the seccomp
// filter, which it hands over as descriptor fd (Launch.Files' first).
func bwrapLaunch(p Plan, u User, fd int, argv []string) (Launch, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return Launch{}, fmt.Errorf("%w: bubblewrap (bwrap) is not installed: install it (apt-get install bubblewrap)", ErrUnavailable)
	}
	if bad := p.Unreachable(u); len(bad) > 0 {
		return Launch{}, fmt.Errorf("%w: the run's user (uid %d) cannot reach %s: %s", ErrUnavailable, u.UID, bad[0].Path, bad[0].Why)
	}
	filter, err := seccompFile()
	if err != nil {
		return Launch{}, err
	}
	return Launch{Argv: append([]string{bwrap}, BwrapArgs(p, u, fd, argv)...), Files: []*os.File{filter}, User: u}, nil
}

// seccompFile is the compiled filter in a sealed memory file, for bwrap's
// --seccomp.
func seccompFile() (*os.File, error) {
	filter, err := SeccompFilter()
	if err != nil {
		return nil, err
	}
	return memFile("nanoclawd-seccomp", filter)
}

var probe struct {
	sync.Mutex
	ok time.Time
	as User
}

// Probe checks that a sandbox can be built here for runs as u, by building
// one around /bin/true (on Linux) or checking sandbox-exec (on macOS). A
// success is remembered for a minute, a failure is looked at again on the
// next call.
func Probe(ctx context.Context, u User) error {
	probe.Lock()
	defer probe.Unlock()
	if time.Since(probe.ok) < time.Minute && probe.as == u {
		return nil
	}
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "linux":
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			return fmt.Errorf("%w: bubblewrap (bwrap) is not installed: install it (apt-get install bubblewrap)", ErrUnavailable)
		}
		c, err := ProbeCommand(ctx, bwrap, u)
		if err != nil {
			return err
		}
		cmd = c
		defer func() {
			for _, f := range cmd.ExtraFiles {
				f.Close()
			}
		}()
	case "darwin":
		cmd = exec.CommandContext(ctx, "/usr/bin/sandbox-exec", "-p", "(version 1)(allow default)", "/usr/bin/true")
	default:
		return fmt.Errorf("%w: no sandbox for %s (only Linux with bubblewrap and macOS)", ErrUnavailable, runtime.GOOS)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		said := strings.TrimSpace(string(out))
		if said == "" {
			said = err.Error()
		}
		return fmt.Errorf("%w: %s: %s (allow unprivileged user namespaces, e.g. sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu; bubblewrap 0.8 or later for --disable-userns)",
			ErrUnavailable, cmd.Path, said)
	}
	probe.ok, probe.as = time.Now(), u
	return nil
}

// ProbeCommand is bubblewrap (the program bwrap) building a sandbox like
// a run's (as u, the seccomp filter, no nested user namespaces, a bounded
// /dev/shm) around /bin/true. The caller closes cmd.ExtraFiles.
func ProbeCommand(ctx context.Context, bwrap string, u User) (*exec.Cmd, error) {
	filter, err := seccompFile()
	if err != nil {
		return nil, err
	}
	p := Plan{Workdir: "/", Mounts: []Mount{{Path: "/usr", Mode: ReadOnly, Dir: true}}, Limits: Limits{ShmSize: 1 << 20}}
	for _, s := range []string{"/bin", "/lib", "/lib64"} {
		if link, err := os.Readlink(s); err == nil {
			p.Mounts = append(p.Mounts, Mount{Path: s, Mode: ReadOnly, Link: link})
		} else if _, err := os.Stat(s); err == nil {
			p.Mounts = append(p.Mounts, Mount{Path: s, Mode: ReadOnly, Dir: true})
		}
	}
	cmd := exec.CommandContext(ctx, bwrap, BwrapArgs(p, u, 3, []string{"/bin/true"})...)
	cmd.ExtraFiles = []*os.File{filter}
	// Killed halfway (its run stopped), bwrap leaves its child waiting for
	// it forever, holding the output: the whole process group goes, and
	// the output is not waited for past WaitDelay.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: Launch{User: u}.Credential(), Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	return cmd, nil
}

// Cleanup removes the empty placeholders the sandbox made on the host for
// protected names that did not exist.
func Cleanup(p Plan) {
	for _, m := range p.Mounts {
		if m.Missing {
			cleanOne(m)
		}
	}
}

func cleanOne(m Mount) {
	if fi, err := os.Lstat(m.Path); err == nil && (fi.IsDir() || fi.Size() == 0) {
		os.Remove(m.Path) // fails, and keeps it, if a directory is not empty
	}
}
