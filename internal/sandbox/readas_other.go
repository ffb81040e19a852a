//go:build !linux

package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// OpenAs opens name below root for reading as u could: where a thread
// cannot take another identity, the file's own permission bits are
// checked against u once it is open.
func OpenAs(root *os.Root, name string, u User) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil || !u.Switches() {
		return f, err
	}
	fi, err := f.Stat()
	if err == nil && access(fi, u)&4 == 0 {
		err = &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// RealPath is where the open file f is, links resolved.
func RealPath(f *os.File) (string, error) {
	p, err := filepath.EvalSymlinks(f.Name())
	if err != nil {
		return "", fmt.Errorf("where is %s: %w", f.Name(), err)
	}
	return p, nil
}
