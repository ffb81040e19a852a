//go:build !linux

package runner

import (
	"errors"
	"syscall"
)

// sysProcAttr puts the agent in a process group of its own, so one signal
// reaches everything it starts. (Pdeathsig exists only on Linux.)
// intoCgroup: cgroups are Linux only.
func intoCgroup(*syscall.SysProcAttr, int) {}

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// awaitExit is not available here: Run falls back to reaping at once.
func awaitExit(pid int) error { return errors.ErrUnsupported }

// fionread asks how many bytes a pipe holds unread: _IOR('f', 127, int)
// on macOS and the BSDs.
const fionread = 0x4004667f
