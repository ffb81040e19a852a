package sandbox

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// SeccompPolicy names the seccomp filter every confined run gets; security
// show prints it, and a change to what it refuses gets a new name.
const SeccompPolicy = "nanoclawd-agent/2"

// refused are the system calls no agent needs that open most of the
// kernel's attack surface: other processes' memory, the keyring, eBPF,
// perf, userfaultfd and io_uring (the usual exploit primitives), mounts
// and namespaces (the way back to capabilities), kexec and modules.
var refused = []string{
	"ptrace", "process_vm_readv", "process_vm_writev",
	"keyctl", "add_key", "request_key",
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"setns", "unshare",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"open_by_handle_at",
	// SysV shared memory and message queues hold memory that no process
	// maps and no limit of the run counts (POSIX shared memory lives in
	// the run's bounded /dev/shm instead).
	"shmget", "msgget",
}

// notThere are refused as if the kernel lacked them, so libraries fall
// back to a call whose arguments the filter can see: clone3 and openat2
// pass their flags in memory a filter cannot read.
var notThere = []string{"clone3", "openat2"}

// namespaceFlags are the CLONE_NEW* flags clone(2) takes (CLONE_NEWTIME
// only exists for clone3 and unshare, both refused whole).
const namespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
	unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// setID are the mode bits no file a run makes may keep.
const setID = unix.S_ISUID | unix.S_ISGID

// creating are the open flags that make a file (O_TMPFILE without the
// O_DIRECTORY it includes, which plain directory opens carry).
const creating = unix.O_CREAT | unix.O_TMPFILE&^unix.O_DIRECTORY

// errEPERM is the answer to a refused call: "operation not permitted".
const errEPERM = seccomp.ActionErrno | seccomp.Action(unix.EPERM)

func seccompPolicy(names map[string]int) seccomp.Policy {
	known := func(list []string) []string {
		var out []string
		for _, n := range list {
			if _, ok := names[n]; ok {
				out = append(out, n)
			}
		}
		return out
	}
	bits := func(arg uint32, v uint64) seccomp.Condition {
		return seccomp.Condition{Argument: arg, Operation: seccomp.BitsSet, Value: v}
	}
	var cond []seccomp.NameWithConditions
	add := func(name string, c ...seccomp.Condition) {
		if _, ok := names[name]; ok {
			cond = append(cond, seccomp.NameWithConditions{Name: name, Conditions: c})
		}
	}
	add("clone", bits(0, namespaceFlags))
	// ioctl, personality and socket: argRules (seccomp_args_linux.go).
	// Setuid and setgid bits, however a file gets its mode.
	add("chmod", bits(1, setID))
	add("fchmod", bits(1, setID))
	add("fchmodat", bits(2, setID))
	add("fchmodat2", bits(2, setID))
	add("creat", bits(1, setID))
	add("open", bits(1, creating), bits(2, setID))
	add("openat", bits(2, creating), bits(3, setID))
	add("mknod", bits(1, setID))
	add("mknodat", bits(2, setID))
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Names: known(refused), Action: errEPERM},
			{Names: known(notThere), Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)},
			{NamesWithCondtions: cond, Action: errEPERM},
		},
	}
}

// SeccompFilter is the compiled filter in the form bwrap --seccomp reads:
// an array of struct sock_filter in the machine's byte order.
var SeccompFilter = sync.OnceValues(func() ([]byte, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("%w: no seccomp filter for this architecture: %w", ErrUnavailable, err)
	}
	pol := seccompPolicy(info.SyscallNames)
	prog, err := pol.Assemble()
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp policy %s: %w", ErrUnavailable, SeccompPolicy, err)
	}
	// The library lets calls of another ABI (i386 through int 0x80 on
	// x86-64) through by default; those are refused here, first.
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(errEPERM)},
	}
	guard = append(guard, argPrefix(info.SyscallNames)...)
	raw, err := bpf.Assemble(append(guard, prog...))
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp policy %s: %w", ErrUnavailable, SeccompPolicy, err)
	}
	var b bytes.Buffer
	for _, in := range raw {
		binary.Write(&b, binary.NativeEndian, struct {
			Code   uint16
			Jt, Jf uint8
			K      uint32
		}{in.Op, in.Jt, in.Jf, in.K})
	}
	return b.Bytes(), nil
})

// memFile is data in an anonymous memory file, read from its start.
func memFile(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: memfd for %s: %w", ErrUnavailable, name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: write %s: %w", ErrUnavailable, name, err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: rewind %s: %w", ErrUnavailable, name, err)
	}
	return f, nil
}
