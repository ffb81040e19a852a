//go:build !linux

package sandbox

import "errors"

// MemoryCgroup: cgroups are Linux only.
func MemoryCgroup() (string, error) {
	return "", errors.New("cgroups are Linux only; memory is measured from outside")
}
