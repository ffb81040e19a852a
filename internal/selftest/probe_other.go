//go:build !linux

package selftest

import (
	"os/exec"
	"strings"
)

// nestedNamespace tries to apply a sandbox profile of its own, which would
// replace the run's (Seatbelt refuses a second profile: it must fail).
func nestedNamespace() (bool, string) {
	out, err := exec.Command("/usr/bin/sandbox-exec", "-p", "(version 1)(allow default)", "/usr/bin/true").CombinedOutput()
	if err == nil {
		return true, "sandbox-exec applied a profile of its own inside the run"
	}
	return false, "sandbox-exec: " + err.Error() + ": " + strings.TrimSpace(string(out))
}

// call is one system call the probe tried.
type call struct {
	name string
	err  error
}

// kernelCalls: the seccomp filter, and these probes, are Linux's.
func kernelCalls() []call { return nil }
