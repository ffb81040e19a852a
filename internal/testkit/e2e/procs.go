package e2e

// Files and processes a test waits for, and a process's captured output.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// WaitGone waits until path no longer exists: a decided IPC file is
// removed after the transaction that did its effect committed, so the
// effect (a message sent) may be seen before the removal.
func WaitGone(tb testing.TB, path string) {
	tb.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := os.Lstat(path)
		if os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s is still there (%v)", path, err)
		}
	}
}

// WaitFile waits until dir holds a file whose name contains sub.
func WaitFile(tb testing.TB, dir, sub string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.Contains(e.Name(), sub) && !e.IsDir() {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("no file in %s", dir)
}

// CountProcs counts running processes whose executable is path.
func CountProcs(path string) int { return len(Pids(path)) }

// Pids lists the running processes whose executable is path: from /proc
// on Linux, from ps on macOS, which has no /proc (a count of none there
// would let every "no agent left" check pass unseen).
func Pids(path string) []int {
	if runtime.GOOS != "linux" {
		return psPids(path)
	}
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if pid, perr := strconv.Atoi(e.Name()); perr == nil && err == nil && exe == path {
			pids = append(pids, pid)
		}
	}
	return pids
}

// psPids is Pids from `ps`: the executable of each process (comm, which
// macOS's ps gives as the path it was started from), at path or at its
// real path (/var/folders is /private/var/folders). A ps that fails fails
// the caller's wait, never a silent none.
func psPids(path string) []int {
	real, _ := filepath.EvalSymlinks(path)
	out, err := exec.Command("ps", "-axww", "-o", "pid=,comm=").Output()
	if err != nil {
		panic(fmt.Sprintf("e2e: ps -ax: %v", err))
	}
	var pids []int
	for _, line := range strings.Split(string(out), "\n") {
		pid, exe, _ := strings.Cut(strings.TrimSpace(line), " ")
		exe = strings.TrimSpace(exe)
		if n, err := strconv.Atoi(pid); err == nil && (exe == path || exe == real) {
			pids = append(pids, n)
		}
	}
	return pids
}

// WaitProcs waits until a process runs path (an agent started, say).
func WaitProcs(tb testing.TB, path, what string) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for CountProcs(path) == 0 {
		if time.Now().After(deadline) {
			tb.Fatalf("%s never started", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitNoProcs waits until no process runs path: one that just answered may
// still be exiting, but one that hangs or was left behind fails the test.
func WaitNoProcs(tb testing.TB, path, what string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n := CountProcs(path); n != 0; n = CountProcs(path) {
		if time.Now().After(deadline) {
			tb.Fatalf("%d %s still running", n, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Buffer is output written by one goroutine (exec for a process, a logger)
// while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// reapIn kills what still works in dir before the test removes it: a
// daemon killed with -9 cannot stop what it started (the start-time
// security test's probe, a run), and a process still writing there made
// t.TempDir's removal fail with "directory not empty".
func reapIn(dir string) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		found := false
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
			if err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
				found = true
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if !found {
			return
		}
	}
}

// removePatiently removes dir, again and again while something still
// makes entries there: the sandbox of a daemon killed with -9 dies a
// moment after it (die-with-parent), and reapIn cannot find it by its
// working directory once it has its own root. t.TempDir's removal then
// finds nothing left to fail on.
func removePatiently(dir string) {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		reapIn(dir)
		if os.RemoveAll(dir) == nil || time.Now().After(deadline) {
			return
		}
	}
}
