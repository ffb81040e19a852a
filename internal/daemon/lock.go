package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// ErrLocked means another daemon runs on the same dataDir.
var ErrLocked = errors.New("another nanoclawd is running")

// deadHolderWait is how long a start waits for a lock whose writer is
// dead. The flock belongs to the open file, not the process: a child the
// killed daemon was forking holds a copy until its exec closes it
// (O_CLOEXEC), so right after a kill -9 the lock can outlive its writer
// for a moment; a daemon restarted at once (systemd, launchd, a test)
// must wait that moment out instead of refusing to start.
const deadHolderWait = 10 * time.Second

// lockWaiting is called each time a start waits on a dead daemon's lock
// (tests release the holder there).
var lockWaiting = func() {}

// acquireLock takes an exclusive flock on the layout's lock file and
// writes our PID in it. The kernel drops the lock when the last copy of
// the file is closed, so a crash never leaves a stale lock behind.
func acquireLock(dataDir string) (*os.File, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	path := layout.New(dataDir, "").Lock()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	deadline := time.Now().Add(deadHolderWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		pid := lockPID(path)
		if pid > 0 && !alive(pid) && time.Now().Before(deadline) {
			lockWaiting()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		f.Close()
		return nil, lockedError(dataDir, path, pid)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// lockedError says who holds the lock: the PID written in it, or, when
// that daemon is gone, the processes that still hold the file open.
func lockedError(dataDir, path string, pid int) error {
	who := "unknown"
	if pid > 0 {
		who = strconv.Itoa(pid)
	}
	if pid > 0 && !alive(pid) {
		held := holders(path)
		if len(held) == 0 {
			held = []string{"none found"}
		}
		return fmt.Errorf("%w on %s: the lock %s outlived its daemon (PID %s, gone) and is held by %s: stop those processes, then start again",
			ErrLocked, dataDir, path, who, strings.Join(held, ", "))
	}
	return fmt.Errorf("%w on %s (PID %s holds %s): stop it first, or give this one another dataDir", ErrLocked, dataDir, who, path)
}

// lockPID is the PID the lock's holder wrote in it, 0 if none.
func lockPID(path string) int {
	b, _ := os.ReadFile(path)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// alive reports whether pid is a process (a zombie counts: it is not
// reaped yet, so its files may not be closed).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// holders lists "PID (command)" for every process with path open, as far
// as /proc shows (Linux; elsewhere nothing).
func holders(path string) []string {
	var out []string
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		for _, fd := range fds {
			if l, _ := os.Readlink(filepath.Join("/proc", p.Name(), "fd", fd.Name())); l == path {
				comm, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
				out = append(out, p.Name()+" ("+strings.TrimSpace(string(comm))+")")
				break
			}
		}
	}
	return out
}

// Lock takes the single-instance lock of dataDir for a command that must
// not run beside a daemon (restore): while it is held no daemon starts,
// and it fails with ErrLocked when one runs. Closing the file releases it.
func Lock(dataDir string) (*os.File, error) { return acquireLock(dataDir) }
