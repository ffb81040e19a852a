package runner

import "syscall"

// sysProcAttr puts the agent in a process group of its own (so one signal
// reaches everything it starts) and has the kernel kill it if the daemon
// dies first, even by SIGKILL.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
