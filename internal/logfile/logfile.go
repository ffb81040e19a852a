// Package logfile is the daemon's own log file: append-only, rotated by size.
package logfile

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Rotating is an append-only log file that is renamed to .1 (.1 to .2,
// …) when it would grow past max bytes, keeping keep old files.
type Rotating struct {
	path string
	max  int64
	keep int

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens (creating) the log at path.
func Open(path string, max int64, keep int) (*Rotating, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	l := &Rotating{path: path, max: max, keep: keep}
	return l, l.open()
}

func (l *Rotating) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, fi.Size()
	return nil
}

// Write appends p, rotating first if p would take the file past max.
func (l *Rotating) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size > 0 && l.size+int64(len(p)) > l.max {
		l.rotate()
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

func (l *Rotating) rotate() {
	l.f.Close()
	for i := l.keep - 1; i >= 1; i-- {
		os.Rename(fmt.Sprintf("%s.%d", l.path, i), fmt.Sprintf("%s.%d", l.path, i+1))
	}
	os.Rename(l.path, l.path+".1")
	if err := l.open(); err != nil {
		// Keep logging somewhere rather than nowhere.
		l.f, _ = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	}
}

// Close closes the file.
func (l *Rotating) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
