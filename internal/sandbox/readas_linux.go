package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenAs opens name below root for reading as u: on a thread of its own
// whose file-system identity is u's (fsuid, fsgid, no supplementary
// groups), so the kernel checks u's permissions and none of the daemon's
// — root's DAC override is gone with its fsuid. The thread is never given
// back (LockOSThread without Unlock ends it with its goroutine), so no
// other goroutine ever runs as u. When the daemon is not root, runs are
// its own user and the file is opened as it is.
func OpenAs(root *os.Root, name string, u User) (*os.File, error) {
	flag := os.O_RDONLY | syscall.O_NONBLOCK // a FIFO must not hang the caller
	if !u.Switches() || os.Geteuid() != 0 {
		return root.OpenFile(name, flag, 0)
	}
	type result struct {
		f   *os.File
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := as(u); err != nil {
			ch <- result{nil, err}
			return
		}
		f, err := root.OpenFile(name, flag, 0)
		ch <- result{f, err}
	}()
	r := <-ch
	return r.f, r.err
}

// as gives the calling thread u's file-system identity and checks that it
// took: setfsuid reports no failure of its own.
func as(u User) error {
	if err := unix.Setgroups(nil); err != nil {
		return fmt.Errorf("drop the supplementary groups to read as uid %d: %w", u.UID, err)
	}
	unix.Setfsgid(u.GID)
	unix.Setfsuid(u.UID)
	gid, _ := unix.SetfsgidRetGid(-1)
	uid, _ := unix.SetfsuidRetUid(-1)
	if uid != u.UID || gid != u.GID {
		return fmt.Errorf("cannot read as uid %d gid %d (the thread is uid %d gid %d)", u.UID, u.GID, uid, gid)
	}
	return nil
}

// RealPath is where the open file f really is, whatever links led to it.
func RealPath(f *os.File) (string, error) {
	return os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
}
