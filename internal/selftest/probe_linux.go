package selftest

import (
	"os/exec"
	"strings"
	"syscall"
)

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
