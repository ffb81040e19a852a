package store

// The disk reserve: a file of zeros the daemon keeps on the data dir's
// disk. When a write finds the disk full — a confined agent filled it, or
// anything else did — the reserve is given up and the transaction tried
// again, so a message already acknowledged to its channel is stored and a
// finished answer is committed rather than lost. The reserve comes back
// once the disk has room again.

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Reserve holds back Size bytes at Path.
type Reserve struct {
	Path string
	Size int64

	mu   sync.Mutex
	held bool
}

// DefaultReserve is the size of the daemon's reserve: room for thousands
// of commits of messages and answers.
const DefaultReserve = 8 << 20

// Hold makes sure the reserve is there, allocating it if the disk has room
// for it with as much again to spare. It reports whether it is held.
func (r *Reserve) Hold() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held {
		return true, nil
	}
	if fi, err := os.Stat(r.Path); err == nil && fi.Size() == r.Size {
		r.held = true // kept from a run before this one
		return true, nil
	}
	if err := os.MkdirAll(dirOf(r.Path), 0o700); err != nil {
		return false, fmt.Errorf("disk reserve %s: %w", r.Path, err)
	}
	if free, err := Free(r.Path); err != nil || free < 2*r.Size {
		return false, err
	}
	f, err := os.OpenFile(r.Path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return false, fmt.Errorf("disk reserve %s: %w", r.Path, err)
	}
	// The file needs real blocks: a sparse file would hold nothing back.
	err = allocate(f, r.Size)
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		os.Remove(r.Path)
		return false, fmt.Errorf("disk reserve %s: %w", r.Path, err)
	}
	r.held = true
	return true, nil
}

// Release gives the reserve up; it reports whether there was one to give.
func (r *Reserve) Release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := os.Remove(r.Path)
	had := r.held || err == nil
	r.held = false
	return had
}

// Held tells whether the reserve is in place.
func (r *Reserve) Held() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// Free is the space left to an unprivileged writer on the disk of path's
// directory.
func Free(path string) (int64, error) {
	var st unix.Statfs_t
	dir := path
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		dir = dirOf(path)
	}
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i > 0 {
		return path[:i]
	}
	return "."
}

// Full tells whether err is the disk (or the database's file system) being
// full.
func Full(err error) bool {
	return sqliteFull(err) || errors.Is(err, syscall.ENOSPC) || (err != nil && strings.Contains(err.Error(), "database or disk is full"))
}
