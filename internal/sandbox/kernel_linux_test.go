package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// The filter, run in a BPF interpreter over the seccomp_data the kernel
// would hand it: every refused call is refused, and what an agent needs
// (reading, plain chmod, thread creation, terminal queries) is not.
func TestSeccompFilterRefusesEachCall(t *testing.T) {
	info, err := arch.GetInfo("")
	if err != nil {
		t.Skip(err)
	}
	raw, err := SeccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	var prog []bpf.Instruction
	for i := 0; i < len(raw); i += 8 {
		ins := bpf.RawInstruction{Op: binary.NativeEndian.Uint16(raw[i:]), Jt: raw[i+2], Jf: raw[i+3], K: binary.NativeEndian.Uint32(raw[i+4:])}
		prog = append(prog, ins.Disassemble())
	}
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	// The interpreter loads words big-endian, as from a packet: lay
	// seccomp_data out so each 32-bit load reads what the kernel's would.
	run := func(archID uint32, name string, args ...uint64) uint32 {
		nr, ok := info.SyscallNames[name]
		if !ok {
			t.Fatalf("no syscall %s on %s", name, info.Name)
		}
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[0:], uint32(nr))
		binary.BigEndian.PutUint32(data[4:], archID)
		for i, a := range args {
			binary.BigEndian.PutUint32(data[16+8*i:], uint32(a))
			binary.BigEndian.PutUint32(data[20+8*i:], uint32(a>>32))
		}
		v, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(v)
	}
	eperm, enosys, allow := uint32(errEPERM), uint32(seccomp.ActionErrno)|uint32(unix.ENOSYS), uint32(seccomp.ActionAllow)
	eafno := uint32(seccomp.ActionErrno) | uint32(unix.EAFNOSUPPORT)
	eproto := uint32(seccomp.ActionErrno) | uint32(unix.EPROTONOSUPPORT)
	id := uint32(info.ID)
	for _, name := range refused {
		if _, ok := info.SyscallNames[name]; ok {
			if got := run(id, name); got != eperm {
				t.Errorf("%s: action %#x, want EPERM", name, got)
			}
		}
	}
	for _, name := range notThere {
		if got := run(id, name); got != enosys {
			t.Errorf("%s: action %#x, want ENOSYS", name, got)
		}
	}
	for _, c := range []struct {
		name string
		args []uint64
		want uint32
	}{
		{"clone", []uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, eperm},
		{"clone", []uint64{unix.CLONE_NEWNET}, eperm},
		{"clone", []uint64{unix.CLONE_VM | unix.CLONE_THREAD | unix.CLONE_SIGHAND | unix.CLONE_FS | unix.CLONE_FILES}, allow},
		{"clone", []uint64{uint64(unix.SIGCHLD)}, allow},
		{"ioctl", []uint64{0, unix.TIOCSTI}, eperm},
		{"ioctl", []uint64{0, unix.TIOCLINUX}, eperm},
		{"ioctl", []uint64{0, unix.TCGETS}, allow},
		// The kernel reads the command as 32 bits: the high ones change nothing.
		{"ioctl", []uint64{0, 1<<32 | unix.TIOCSTI}, eperm},
		{"ioctl", []uint64{0, 0xffffffff<<32 | unix.TIOCLINUX}, eperm},
		{"ioctl", []uint64{0, 1<<32 | unix.TCGETS}, allow},
		{"personality", []uint64{0}, allow},
		{"personality", []uint64{0xffffffff}, allow},
		{"personality", []uint64{0x0040000}, eperm}, // ADDR_NO_RANDOMIZE
		{"personality", []uint64{0x0400000}, eperm}, // READ_IMPLIES_EXEC
		{"personality", []uint64{1 << 32}, allow},
		{"socket", []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, allow},
		{"socket", []uint64{unix.AF_INET6, unix.SOCK_DGRAM, 0}, allow},
		{"socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, allow},
		{"socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}, allow},
		{"socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT}, eproto},
		{"socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, 1<<32 | unix.NETLINK_KOBJECT_UEVENT}, eproto},
		{"socket", []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, eafno},
		{"socket", []uint64{1<<32 | unix.AF_VSOCK, unix.SOCK_STREAM, 0}, eafno},
		{"socket", []uint64{unix.AF_PACKET, unix.SOCK_RAW, 0}, eafno},
		{"socket", []uint64{unix.AF_ALG, unix.SOCK_SEQPACKET, 0}, eafno},
		{"socketpair", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, allow},
		{"socketpair", []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, eafno},
		{"shmget", []uint64{0, 1 << 30, 0o1600}, eperm},
		{"msgget", []uint64{0, 0o1600}, eperm},
		{"fchmod", []uint64{3, 0o4755}, eperm},
		{"fchmod", []uint64{3, 0o2755}, eperm},
		{"fchmod", []uint64{3, 0o755}, allow},
		{"fchmodat", []uint64{fdcwd, 0, 0o6755}, eperm},
		{"fchmodat", []uint64{fdcwd, 0, 0o1777}, allow},
		{"fchmodat2", []uint64{fdcwd, 0, 0o4700}, eperm},
		{"openat", []uint64{fdcwd, 0, unix.O_CREAT | unix.O_WRONLY, 0o4755}, eperm},
		{"openat", []uint64{fdcwd, 0, unix.O_TMPFILE | unix.O_WRONLY, 0o2755}, eperm},
		{"openat", []uint64{fdcwd, 0, unix.O_CREAT | unix.O_WRONLY, 0o644}, allow},
		{"openat", []uint64{fdcwd, 0, unix.O_RDONLY | unix.O_DIRECTORY, 0}, allow},
		{"mknodat", []uint64{fdcwd, 0, unix.S_IFREG | 0o4755}, eperm},
		{"read", []uint64{0, 0, 0}, allow},
	} {
		if _, ok := info.SyscallNames[c.name]; !ok {
			continue
		}
		if got := run(id, c.name, c.args...); got != c.want {
			t.Errorf("%s%o: action %#x, want %#x", c.name, c.args, got, c.want)
		}
	}
	for _, name := range []string{"chmod", "creat"} {
		if _, ok := info.SyscallNames[name]; ok && run(id, name, 0, 0o4755) != eperm {
			t.Errorf("%s with a setuid mode is not refused", name)
		}
	}
	// Another ABI (i386 through int 0x80) gets no way around the list.
	if got := run(id^1, "read"); got != eperm {
		t.Errorf("a call of a foreign architecture: action %#x, want EPERM", got)
	}
}

// fdcwd is AT_FDCWD as a register holds it.
const fdcwd = uint64(1<<64 - 100)

// probeEnv makes this test binary, started inside a sandbox, try each
// refused call and print "name errno" per line instead of testing.
const probeEnv = "NANOCLAWD_SANDBOX_PROBE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(probeEnv); dir != "" {
		probeCalls(dir)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// probeCalls tries each call the filter refuses, with arguments that do
// no harm when it is let through, and prints what the kernel answered.
func probeCalls(dir string) {
	sys := func(nr uintptr, a ...uintptr) syscall.Errno {
		var x [6]uintptr
		copy(x[:], a)
		_, _, e := syscall.Syscall6(nr, x[0], x[1], x[2], x[3], x[4], x[5])
		return e
	}
	str := func(s string) uintptr { p, _ := unix.BytePtrFromString(s); return uintptr(unsafe.Pointer(p)) }
	file := filepath.Join(dir, "probe-file")
	os.WriteFile(file, nil, 0o644)
	c := byte('x')
	for _, p := range []struct {
		name string
		call func() syscall.Errno
	}{
		{"ptrace", func() syscall.Errno { return sys(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, uintptr(os.Getppid())) }},
		{"process_vm_readv", func() syscall.Errno { return sys(unix.SYS_PROCESS_VM_READV, uintptr(os.Getpid())) }},
		{"process_vm_writev", func() syscall.Errno { return sys(unix.SYS_PROCESS_VM_WRITEV, uintptr(os.Getpid())) }},
		{"keyctl", func() syscall.Errno { return sys(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, ^uintptr(0)) }},
		{"add_key", func() syscall.Errno { return sys(unix.SYS_ADD_KEY, str("user"), str("k"), str("v"), 1, ^uintptr(1)) }},
		{"request_key", func() syscall.Errno { return sys(unix.SYS_REQUEST_KEY, str("user"), str("nope")) }},
		{"bpf", func() syscall.Errno { return sys(unix.SYS_BPF, 1000) }},
		{"perf_event_open", func() syscall.Errno { return sys(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0)) }},
		{"userfaultfd", func() syscall.Errno { return sys(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|1) }},
		{"io_uring_setup", func() syscall.Errno { return sys(unix.SYS_IO_URING_SETUP, 1, 0) }},
		{"io_uring_enter", func() syscall.Errno { return sys(unix.SYS_IO_URING_ENTER, ^uintptr(0)) }},
		{"io_uring_register", func() syscall.Errno { return sys(unix.SYS_IO_URING_REGISTER, ^uintptr(0)) }},
		{"mount", func() syscall.Errno { return sys(unix.SYS_MOUNT, str("none"), str(dir), str("tmpfs")) }},
		{"umount2", func() syscall.Errno { return sys(unix.SYS_UMOUNT2, str(dir)) }},
		{"pivot_root", func() syscall.Errno { return sys(unix.SYS_PIVOT_ROOT, str(dir), str(dir)) }},
		{"move_mount", func() syscall.Errno { return sys(unix.SYS_MOVE_MOUNT, ^uintptr(0), 0, ^uintptr(0)) }},
		{"open_tree", func() syscall.Errno { return sys(unix.SYS_OPEN_TREE, ^uintptr(0), str("x")) }},
		{"fsopen", func() syscall.Errno { return sys(unix.SYS_FSOPEN, str("tmpfs")) }},
		{"fsconfig", func() syscall.Errno { return sys(unix.SYS_FSCONFIG, ^uintptr(0)) }},
		{"fsmount", func() syscall.Errno { return sys(unix.SYS_FSMOUNT, ^uintptr(0)) }},
		{"setns", func() syscall.Errno { return sys(unix.SYS_SETNS, ^uintptr(0)) }},
		{"unshare", func() syscall.Errno { return sys(unix.SYS_UNSHARE, 0) }},
		{"unshare-user", func() syscall.Errno { return sys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER) }},
		{"clone-newuser", func() syscall.Errno {
			return sys(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_NEWNS|uintptr(unix.SIGCHLD))
		}},
		{"clone3", func() syscall.Errno { return sys(unix.SYS_CLONE3, 0, 0) }},
		{"kexec_load", func() syscall.Errno { return sys(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0) }},
		{"kexec_file_load", func() syscall.Errno { return sys(unix.SYS_KEXEC_FILE_LOAD, ^uintptr(0), ^uintptr(0)) }},
		{"init_module", func() syscall.Errno { return sys(unix.SYS_INIT_MODULE, 0, 0, str("")) }},
		{"finit_module", func() syscall.Errno { return sys(unix.SYS_FINIT_MODULE, ^uintptr(0), str("")) }},
		{"delete_module", func() syscall.Errno { return sys(unix.SYS_DELETE_MODULE, str("nanoclawd-none"), 0) }},
		{"tiocsti", func() syscall.Errno { return sys(unix.SYS_IOCTL, 0, unix.TIOCSTI, uintptr(unsafe.Pointer(&c))) }},
		{"tioclinux", func() syscall.Errno { return sys(unix.SYS_IOCTL, 0, unix.TIOCLINUX, uintptr(unsafe.Pointer(&c))) }},
		{"tiocsti-high", func() syscall.Errno { return sys(unix.SYS_IOCTL, 0, 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c))) }},
		{"personality", func() syscall.Errno { return sys(unix.SYS_PERSONALITY, 0x0400000) }}, // READ_IMPLIES_EXEC
		{"vsock", func() syscall.Errno { return closed(sys2(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0)) }},
		{"packet", func() syscall.Errno { return closed(sys2(unix.SYS_SOCKET, unix.AF_PACKET, unix.SOCK_RAW, 0)) }},
		{"netlink-audit", func() syscall.Errno {
			return closed(sys2(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_AUDIT))
		}},
		{"shmget", func() syscall.Errno { return sys(unix.SYS_SHMGET, 0, 1<<20, 0o1600) }},
		{"msgget", func() syscall.Errno { return sys(unix.SYS_MSGGET, 0, 0o1600) }},
		{"chmod-setuid", func() syscall.Errno { return sys(unix.SYS_FCHMODAT, uintptr(fdcwd), str(file), 0o4755) }},
		{"create-setuid", func() syscall.Errno {
			fd, _, e := syscall.Syscall6(unix.SYS_OPENAT, uintptr(fdcwd), str(file+"2"), unix.O_CREAT|unix.O_WRONLY, 0o4755, 0, 0)
			if e == 0 {
				syscall.Close(int(fd))
			}
			return e
		}},
	} {
		fmt.Printf("%s %d\n", p.name, p.call())
	}
}

// refusedInside are the probes and the errno the filter answers each.
var refusedInside = map[string]syscall.Errno{
	"ptrace": unix.EPERM, "process_vm_readv": unix.EPERM, "process_vm_writev": unix.EPERM,
	"keyctl": unix.EPERM, "add_key": unix.EPERM, "request_key": unix.EPERM,
	"bpf": unix.EPERM, "perf_event_open": unix.EPERM, "userfaultfd": unix.EPERM,
	"io_uring_setup": unix.EPERM, "io_uring_enter": unix.EPERM, "io_uring_register": unix.EPERM,
	"mount": unix.EPERM, "umount2": unix.EPERM, "pivot_root": unix.EPERM, "move_mount": unix.EPERM,
	"open_tree": unix.EPERM, "fsopen": unix.EPERM, "fsconfig": unix.EPERM, "fsmount": unix.EPERM,
	"setns": unix.EPERM, "unshare": unix.EPERM, "unshare-user": unix.EPERM, "clone-newuser": unix.EPERM,
	"clone3": unix.ENOSYS, "kexec_load": unix.EPERM, "kexec_file_load": unix.EPERM,
	"init_module": unix.EPERM, "finit_module": unix.EPERM, "delete_module": unix.EPERM,
	"tiocsti": unix.EPERM, "tioclinux": unix.EPERM, "chmod-setuid": unix.EPERM, "create-setuid": unix.EPERM,
	"tiocsti-high": unix.EPERM, "personality": unix.EPERM, "vsock": unix.EAFNOSUPPORT, "packet": unix.EAFNOSUPPORT,
	"netlink-audit": unix.EPROTONOSUPPORT, "shmget": unix.EPERM, "msgget": unix.EPERM,
}

// sys2 is a call's result and errno; closed closes a descriptor it made.
func sys2(nr uintptr, a, b, c uintptr) (uintptr, syscall.Errno) {
	r, _, e := syscall.Syscall(nr, a, b, c)
	return r, e
}

func closed(fd uintptr, e syscall.Errno) syscall.Errno {
	if e == 0 {
		syscall.Close(int(fd))
	}
	return e
}

// Each refused call, tried from inside a real sandbox as a run is built
// (as the run's user, bwrap's namespaces, the filter): the kernel answers
// as the filter says. The same probe in the same sandbox without the
// filter shows which of them the filter alone stops (the rest the missing
// capabilities stop as well).
func TestRefusedCallsInsideARealSandbox(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap)")
	}
	root, in := world(t)
	probe := filepath.Join(root, "agent", "probe")
	copyFile(t, os.Args[0], probe, 0o755)
	in.Binary = ""
	in.Command = []string{probe}
	p := New(in)
	u := RunUser(User{DefaultRunID, DefaultRunID})
	if err := HandOver(in.GroupDir, u); err != nil {
		t.Fatal(err)
	}
	inside := func(filtered bool) map[string]syscall.Errno {
		t.Helper()
		out := runIn(t, p, u, filtered, []string{probe}, probeEnv+"="+in.GroupDir)
		got := map[string]syscall.Errno{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var name string
			var e int
			if _, err := fmt.Sscan(l, &name, &e); err == nil {
				got[name] = syscall.Errno(e)
			}
		}
		return got
	}
	with, without := inside(true), inside(false)
	for name, want := range refusedInside {
		if got, ok := with[name]; !ok || got != want {
			t.Errorf("%s inside the sandbox: %v (ran %v), want %v", name, got, ok, want)
		}
		t.Logf("%-18s filtered: %-28v unfiltered: %v", name, with[name], without[name])
	}
	// Where nothing else stops them, the filter does: the probe is real.
	for _, name := range []string{"unshare", "process_vm_readv", "chmod-setuid", "create-setuid", "clone3", "personality", "shmget", "msgget", "netlink-audit"} {
		if without[name] == with[name] {
			t.Errorf("%s gives %v without the filter too: the probe cannot tell", name, with[name])
		}
	}
}

// The plan, run for real, as a run is started: inside, the group's folder
// is writable, the owner's secret and the root are not there, a protected
// name cannot be created, the user is the run's (never root), nested user
// namespaces, writes to /dev and setuid bits are refused, and /dev/shm is
// bounded. On the host, what the run made is the run user's.
func TestSandboxRunsForReal(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap)")
	}
	root, in := world(t)
	in.Binary = "" // no sandbox-init here: run a shell directly
	p := New(in)
	u := RunUser(User{DefaultRunID, DefaultRunID})
	if err := HandOver(in.GroupDir, u, layout.LogsDir); err != nil {
		t.Fatal(err)
	}
	script := `id -u; echo hi > ok.txt && echo wrote; cat ` + filepath.Join(root, "home/.ssh/id_rsa") + ` 2>&1; ls ` + root + ` 2>&1;
		echo x > .envrc 2>&1 || echo envrc-refused; cat ` + filepath.Join(root, "home/docs/recipes.md") + `; echo; ls /etc | wc -l
		unshare -Ur true 2>/dev/null && echo USERNS-OPEN || echo userns-refused
		touch /dev/x 2>/dev/null && echo DEV-WRITABLE || echo dev-refused
		cp /bin/sh ./sh && chmod 4755 ./sh 2>/dev/null && echo SETUID-SET || echo setuid-refused
		df -k /dev/shm | tail -1`
	got := runIn(t, p, u, true, []string{"/bin/sh", "-c", script})
	t.Logf("inside:\n%s", got)
	for _, want := range []string{"wrote", "envrc-refused", "x\n", "userns-refused", "dev-refused", "setuid-refused", " 65536 "} {
		if !strings.Contains(got, want) {
			t.Errorf("inside output lacks %q", want)
		}
	}
	if !strings.HasPrefix(got, strconv.Itoa(u.UID)+"\n") || strings.HasPrefix(got, "0\n") {
		t.Errorf("the run is not uid %d inside", u.UID)
	}
	fi, err := os.Stat(filepath.Join(in.GroupDir, "ok.txt"))
	if err != nil {
		t.Fatalf("the group's folder is not writable: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != u.UID || st.Uid == 0 && os.Geteuid() == 0 {
		t.Errorf("a file the run made is uid %d on the host, want %d", st.Uid, u.UID)
	}
	if fi, err := os.Stat(filepath.Join(in.GroupDir, "sh")); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("the run's copy of a shell: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(in.GroupDir, ".envrc")); err == nil {
		Cleanup(p)
		if _, err := os.Stat(filepath.Join(in.GroupDir, ".envrc")); err == nil {
			t.Error("the .envrc placeholder is still there after Cleanup")
		}
	}
}

// A file denyRead names (**/*.key) that lies in an allowed tree behind a
// directory the run's user may not pass (another user's, in a shared
// /tmp) is no reason to fail the run: the cut-out is left out, the run
// starts, and the file stays out of reach.
func TestCutOutBehindAClosedDirectory(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap)")
	}
	u := RunUser(User{DefaultRunID, DefaultRunID})
	if !u.Switches() {
		t.Skip("runs are another user only under a root daemon")
	}
	root, in := world(t)
	in.Binary = ""
	closed := filepath.Join(root, "home", "someone")
	secret := filepath.Join(closed, "sessions", "a.key")
	os.MkdirAll(filepath.Dir(secret), 0o755)
	os.WriteFile(secret, []byte("KEY-CANARY"), 0o644)
	os.Chmod(closed, 0o700)
	in.DenyRead = append(in.DenyRead, "**/*.key")
	p := New(in)
	if _, ok := find(p, secret); !ok {
		t.Fatalf("the plan does not cut out %s, so this proves nothing", secret)
	}
	p.dropUnreachableCutOuts(u)
	if _, ok := find(p, secret); ok {
		t.Errorf("%s is still cut out although the run's user cannot reach it", secret)
	}
	if err := HandOver(in.GroupDir, u, layout.LogsDir); err != nil {
		t.Fatal(err)
	}
	got := runIn(t, p, u, true, []string{"/bin/sh", "-c", "cat " + secret + " 2>&1; echo done"})
	if strings.Contains(got, "KEY-CANARY") || !strings.Contains(got, "done") {
		t.Errorf("inside: %q", got)
	}
}

// runIn runs argv in the sandbox p as u, with or without the seccomp
// filter, and returns its output.
func runIn(t *testing.T, p Plan, u User, filtered bool, argv []string, env ...string) string {
	t.Helper()
	l, err := bwrapLaunch(p, u, FirstFD, argv)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	args := l.Argv[1:]
	if !filtered {
		for i := range args {
			if args[i] == "--seccomp" {
				args = append(args[:i:i], args[i+2:]...)
				break
			}
		}
	}
	cmd := exec.Command(l.Argv[0], args...)
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	cmd.ExtraFiles = append([]*os.File{devnull}, l.Files...) // fd 3 is the runner's lifeline
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: l.Credential()}
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bwrap: %v\n%s", err, out)
	}
	return string(out)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// A run's memory cgroup counts shared memory: a process that fills
// /dev/shm past the limit is killed, and the cgroup says so. Only where
// the daemon's cgroup has the memory controller delegated.
func TestMemoryCgroupCountsSharedMemory(t *testing.T) {
	if _, err := MemoryCgroup(); err != nil {
		t.Skipf("this machine cannot give runs a memory cgroup, so doctor says so and the daemon measures memory instead: %v", err)
	}
	cg, err := NewRunCgroup(fmt.Sprintf("test-%d", os.Getpid()), 32<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	shm := fmt.Sprintf("/dev/shm/nanoclawd-test-%d", os.Getpid())
	defer os.Remove(shm)
	cmd := exec.Command("/bin/sh", "-c", "head -c 67108864 /dev/zero > "+shm)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.FD}
	err = cmd.Run()
	if err == nil || !cg.OOMKilled() {
		t.Errorf("64 MiB in /dev/shm under a 32 MiB cgroup: %v, oom-killed %v", err, cg.OOMKilled())
	}
}
