package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrUnavailable is returned (wrapped) when no sandbox can be built here:
// a non-main run then fails closed, it never runs unconfined.
var ErrUnavailable = errors.New("the agent sandbox cannot be built")

// InsideUID is the user a run is inside its sandbox when the daemon runs
// as root; otherwise it keeps the daemon's uid. Either way it holds no
// capability outside its own user namespace.
const InsideUID = 65534

// BwrapArgs is the bubblewrap command line (without the program name) that
// runs argv confined by p. Later mounts cover earlier ones, so the order is
// the plan's: private /tmp, read-only trees, cut-outs, writable dirs,
// cut-outs of those, protected names; the cut-outs are made read-only last
// (a writable dir may sit inside one).
func BwrapArgs(p Plan, uid int, argv []string) []string {
	if uid == 0 {
		uid = InsideUID
	}
	id := strconv.Itoa(uid)
	a := []string{
		"--die-with-parent", "--new-session",
		"--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
		"--uid", id, "--gid", id, "--hostname", "nanoclaw",
		"--cap-drop", "ALL",
		"--proc", "/proc", "--dev", "/dev",
	}
	var readOnly []string
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

// InitArgs is the command line of `nanoclawd sandbox-init` that starts
// command inside the sandbox.
func InitArgs(binary string, p Plan, command []string) []string {
	a := []string{binary, "sandbox-init", "--lifeline", "3",
		"--nproc", strconv.Itoa(p.Limits.Processes),
		"--fsize", strconv.FormatInt(p.Limits.FileSize, 10),
	}
	if p.Socket != "" {
		a = append(a, "--gateway", p.Socket, "--listen", cmp.Or(p.Listen, GatewayAddr))
	}
	return append(append(a, "--"), command...)
}

// Command is the whole confined command line for this OS.
func Command(p Plan, binary string, uid int, command []string) ([]string, error) {
	inner := InitArgs(binary, p, command)
	switch runtime.GOOS {
	case "linux":
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			return nil, fmt.Errorf("%w: bubblewrap (bwrap) is not installed: install it (apt-get install bubblewrap)", ErrUnavailable)
		}
		return append([]string{bwrap}, BwrapArgs(p, uid, inner)...), nil
	case "darwin":
		// No network namespace: each run has a loopback port of its own
		// (Plan.Listen), the only one its profile lets it reach.
		return append([]string{"/usr/bin/sandbox-exec", "-p", Profile(p)}, inner...), nil
	}
	return nil, fmt.Errorf("%w: no sandbox for %s (only Linux with bubblewrap and macOS)", ErrUnavailable, runtime.GOOS)
}

var probe struct {
	sync.Mutex
	ok time.Time
}

// Probe checks that a sandbox can be built here, by building one around
// /bin/true (on Linux) or checking sandbox-exec (on macOS). A success is
// remembered for a minute, a failure is looked at again on the next call.
func Probe(ctx context.Context) error {
	probe.Lock()
	defer probe.Unlock()
	if time.Since(probe.ok) < time.Minute {
		return nil
	}
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "linux":
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			return fmt.Errorf("%w: bubblewrap (bwrap) is not installed: install it (apt-get install bubblewrap)", ErrUnavailable)
		}
		cmd = exec.CommandContext(ctx, bwrap, ProbeArgs()...)
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
		return fmt.Errorf("%w: %s: %s (allow unprivileged user namespaces, e.g. sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu)",
			ErrUnavailable, cmd.Path, said)
	}
	probe.ok = time.Now()
	return nil
}

// ProbeArgs are bubblewrap's arguments for a sandbox like a run's around
// /bin/true.
func ProbeArgs() []string {
	p := Plan{Workdir: "/", Mounts: []Mount{{Path: "/usr", Mode: ReadOnly, Dir: true}}}
	for _, s := range []string{"/bin", "/lib", "/lib64"} {
		if link, err := os.Readlink(s); err == nil {
			p.Mounts = append(p.Mounts, Mount{Path: s, Mode: ReadOnly, Link: link})
		} else if _, err := os.Stat(s); err == nil {
			p.Mounts = append(p.Mounts, Mount{Path: s, Mode: ReadOnly, Dir: true})
		}
	}
	return BwrapArgs(p, os.Getuid(), []string{"/bin/true"})
}

// Cleanup removes the empty placeholders the sandbox made on the host for
// protected names that did not exist.
func Cleanup(p Plan) {
	for _, m := range p.Mounts {
		if !m.Missing {
			continue
		}
		if fi, err := os.Lstat(m.Path); err == nil && (fi.IsDir() || fi.Size() == 0) {
			os.Remove(m.Path) // fails, and keeps it, if a directory is not empty
		}
	}
}
