package daemon

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// ErrLocked means another daemon runs on the same dataDir.
var ErrLocked = errors.New("another nanoclawd is running")

// acquireLock takes an exclusive flock on the layout's lock file and
// writes our PID in it. The kernel drops the lock when the process dies,
// so a crash never leaves a stale lock behind.
func acquireLock(dataDir string) (*os.File, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	path := layout.New(dataDir, "").Lock()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		pid := strings.TrimSpace(string(b))
		if _, perr := strconv.Atoi(pid); perr != nil {
			pid = "unknown"
		}
		return nil, fmt.Errorf("%w on %s (PID %s holds %s): stop it first, or give this one another dataDir", ErrLocked, dataDir, pid, path)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// Lock takes the single-instance lock of dataDir for a command that must
// not run beside a daemon (restore): while it is held no daemon starts,
// and it fails with ErrLocked when one runs. Closing the file releases it.
func Lock(dataDir string) (*os.File, error) { return acquireLock(dataDir) }
