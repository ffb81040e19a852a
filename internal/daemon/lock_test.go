package daemon

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// deadPID is the PID of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// holdLock flocks dataDir's lock as a daemon with PID writer would, hands
// a copy of the open file to a child that lives until its stdin closes
// (a child caught between fork and exec holds it the same way), and
// closes its own copy, as a kill -9 of the writer would.
func holdLock(t *testing.T, dataDir string, writer int) (release func()) {
	t.Helper()
	path := layout.New(dataDir, "").Lock()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte(strconv.Itoa(writer)+"\n"), 0)
	child := exec.Command("sh", "-c", "read x")
	child.ExtraFiles = []*os.File{f}
	stdin, _ := child.StdinPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return func() { stdin.Close(); child.Wait() }
}

// The lock outlives a killed daemon while a child it was starting still
// holds the file: a restart waits for that child instead of failing.
func TestLockWaitsOutADeadDaemonsChild(t *testing.T) {
	dir := t.TempDir()
	release := holdLock(t, dir, deadPID(t))
	waited := false
	lockWaiting = func() {
		if !waited {
			waited = true
			release()
		}
	}
	defer func() { lockWaiting = func() {} }()
	f, err := acquireLock(dir)
	if err != nil {
		t.Fatalf("lock not taken once the dead daemon's child let go: %v", err)
	}
	f.Close()
	if !waited {
		t.Fatal("the lock was free at once: the test did not hold it")
	}
}

// A live daemon's lock is refused at once, naming its PID.
func TestLockRefusedWhileDaemonLives(t *testing.T) {
	dir := t.TempDir()
	release := holdLock(t, dir, os.Getpid())
	defer release()
	_, err := acquireLock(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "PID "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("got %v, want ErrLocked naming PID %d", err, os.Getpid())
	}
}

// A lock held past the wait names the process that holds it.
func TestLockHeldPastWaitNamesHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out deadHolderWait")
	}
	dir := t.TempDir()
	release := holdLock(t, dir, deadPID(t))
	defer release()
	_, err := acquireLock(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "(sh)") {
		t.Fatalf("got %v, want ErrLocked naming the sh that holds it", err)
	}
}
