package selftest

import (
	"os/exec"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// call is one system call the probe tried and what the kernel said.
type call struct {
	name string
	err  error
}

// kernelCalls tries what the seccomp filter must refuse however it is
// asked: TIOCSTI with high bits set (the kernel reads 32), a persona that
// turns off address randomisation, sockets of families and protocols no
// run needs, and SysV shared memory (no limit counts it).
func kernelCalls() []call {
	c := byte('x')
	raw := func(nr uintptr, a ...uintptr) error {
		var x [6]uintptr
		copy(x[:], a)
		r, _, e := syscall.Syscall6(nr, x[0], x[1], x[2], x[3], x[4], x[5])
		if e != 0 {
			return e
		}
		if nr == unix.SYS_SOCKET {
			syscall.Close(int(r))
		}
		return nil
	}
	return []call{
		{"ioctl TIOCSTI|1<<32", raw(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))},
		{"personality ADDR_NO_RANDOMIZE", raw(unix.SYS_PERSONALITY, 0x0040000)},
		{"socket AF_VSOCK", raw(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0)},
		{"socket AF_PACKET", raw(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0)},
		{"socket AF_NETLINK audit", raw(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT)},
		{"shmget", raw(unix.SYS_SHMGET, 0, 64<<20, 0o1600)},
		{"msgget", raw(unix.SYS_MSGGET, 0, 0o1600)},
	}
}

// nestedNamespace tries to make a user namespace inside the run, the first
// step of most container escapes: with clone(CLONE_NEWUSER) and with
// unshare(1) when the runtime has it.
func nestedNamespace() (bool, string) {
	cmd := exec.Command("/proc/self/exe", "sandbox-probe", "--true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	if err := cmd.Run(); err == nil {
		return true, "clone(CLONE_NEWUSER) made a nested user namespace"
	} else if path, lookErr := exec.LookPath("unshare"); lookErr == nil {
		out, uerr := exec.Command(path, "-U", "true").CombinedOutput()
		if uerr == nil {
			return true, "unshare -U made a nested user namespace"
		}
		return false, "clone(CLONE_NEWUSER): " + err.Error() + "; unshare -U: " + strings.TrimSpace(string(out))
	} else {
		return false, "clone(CLONE_NEWUSER): " + err.Error()
	}
}
