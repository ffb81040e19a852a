//go:build !linux

package sandbox

import "errors"

// MemoryCgroup: cgroups are Linux only.
func MemoryCgroup() (string, error) {
	return "", errors.New("cgroups are Linux only; memory is measured from outside")
}

// RunCgroup: Linux only.
type RunCgroup struct {
	Dir string
	FD  int
}

// NewRunCgroup: Linux only.
func NewRunCgroup(string, int64) (*RunCgroup, error) {
	return nil, errors.New("cgroups are Linux only")
}

// OOMKilled: Linux only.
func (c *RunCgroup) OOMKilled() bool { return false }

// Close: Linux only.
func (c *RunCgroup) Close() {}
