package runner

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the agent in a process group of its own (so one signal
// reaches everything it starts) and has the kernel kill it if the daemon
// dies first, even by SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// intoCgroup starts the process inside the cgroup whose directory is open
// as fd (CLONE_INTO_CGROUP), if fd > 0.
func intoCgroup(attr *syscall.SysProcAttr, fd int) {
	if fd > 0 {
		attr.UseCgroupFD, attr.CgroupFD = true, fd
	}
}

// awaitExit blocks until the process has exited but leaves it unreaped: while
// the zombie exists its pid, and so its process group id, cannot be given to
// another process, so killing the group afterwards never hits a stranger.
func awaitExit(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// fionread asks how many bytes a pipe holds unread (FIONREAD, which
// Linux calls TIOCINQ).
const fionread = unix.TIOCINQ
