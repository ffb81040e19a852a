package sdkproof

import (
	"os/exec"
	"syscall"
)

// newProcessGroup gives the runner a process group of its own, as the daemon
// does, so one signal reaches node, the claude CLI and its sandboxed shells.
func newProcessGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
