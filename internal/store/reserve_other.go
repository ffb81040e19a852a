//go:build !linux

package store

import "os"

// allocate gives f size bytes of real blocks by writing zeros: macOS has
// no fallocate, and written zeros hold the space on every file system
// (the reserve is written once, 8 MiB).
func allocate(f *os.File, size int64) error {
	_, err := f.Write(make([]byte, size))
	return err
}
