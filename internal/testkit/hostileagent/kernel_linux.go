package main

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// kernelCalls are the calls a run never needs that a filter comparing
// too much or too little would let through: TIOCSTI with high bits set
// (the kernel reads the command as 32 bits), a persona that turns off
// address randomisation, sockets of families and protocols no agent uses,
// and SysV shared memory, which no limit counts.
func kernelCalls() map[string]error {
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
	return map[string]error{
		"tiocsti|1<<32":        raw(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c))),
		"personality":          raw(unix.SYS_PERSONALITY, 0x0040000),
		"socket vsock":         raw(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0),
		"socket packet":        raw(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0),
		"socket netlink audit": raw(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT),
		"shmget":               raw(unix.SYS_SHMGET, 0, 64<<20, 0o1600),
	}
}

// holdMemfd puts mib MiB in anonymous memory files, 4 MiB to a file (one
// file may be bounded by RLIMIT_FSIZE; many are not), and keeps them open,
// not mapped: no process's resident size shows them.
func holdMemfd(mib int) (int, error) {
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	fd := -1
	for i := 0; i < mib; i++ {
		if i%4 == 0 {
			var err error
			if fd, err = unix.MemfdCreate("hostile", 0); err != nil {
				return i, fmt.Errorf("memfd_create: %w", err)
			}
		}
		if _, err := unix.Write(fd, chunk); err != nil {
			return i, err
		}
	}
	return mib, nil // the files stay open for the rest of the run
}
