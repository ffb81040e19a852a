//go:build !linux

package sandbox

import (
	"fmt"
	"os"
)

// SeccompPolicy names the seccomp filter of a Linux run; macOS has none.
const SeccompPolicy = "none (macOS: the Seatbelt profile)"

// SeccompFilter is only built on Linux.
func SeccompFilter() ([]byte, error) {
	return nil, fmt.Errorf("%w: seccomp is Linux only", ErrUnavailable)
}

func memFile(string, []byte) (*os.File, error) {
	return nil, fmt.Errorf("%w: seccomp is Linux only", ErrUnavailable)
}
