//go:build !linux

package runner

import "syscall"

// sysProcAttr puts the agent in a process group of its own, so one signal
// reaches everything it starts. (Pdeathsig exists only on Linux.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
