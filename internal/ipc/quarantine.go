package ipc

// The quarantine, <dataDir>/ipc/errors/: a refused file and its reason,
// kept for the owner to look at, within a bound. A flood of refused files
// (or one huge sparse one) must not fill the disk the database and the
// answers need, so past errorsMaxEntries entries or errorsMaxBytes bytes a
// refused file is deleted instead; its reason stays in the audit trail
// (the violations table and the group's security.jsonl) all the same.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/groupfs"
)

const (
	// errorsMaxEntries bounds the directory's entries, the .reason files
	// included: a refused file kept takes two.
	errorsMaxEntries = 1000
	errorsMaxBytes   = 100 << 20
)

// errorsUse is what ipc/errors holds, counted once at start and kept up to
// date by quarantine (only Run's goroutine quarantines).
type errorsUse struct {
	counted        bool
	entries, bytes int64
}

// count reads what dir holds now.
func (u *errorsUse) count(dir string) error {
	list, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	u.entries, u.bytes = int64(len(list)), 0
	for _, d := range list {
		if fi, err := d.Info(); err == nil {
			u.bytes += fi.Size()
		}
	}
	u.counted = true
	return nil
}

// quarantine moves e's file from dir, if any (whatever it is: a symlink or
// FIFO is moved, not followed or opened), to ipc/errors/ with the reason
// beside it, or deletes it when the quarantine is full. Repeating it after
// a crash only rewrites the reason.
func (w *Watcher) quarantine(e *entry, dir *groupfs.Dir, reason string) error {
	u := &w.errUse
	if !u.counted {
		if err := u.count(w.cfg.Layout.IPCErrors()); err != nil {
			return fmt.Errorf("quarantine %s: %w", e.ref, err)
		}
	}
	dest := filepath.Join(w.cfg.Layout.IPCErrors(), fmt.Sprintf("%s.%s.%d.%s", e.folder, e.sub, e.id, e.name))
	note := []byte(reason + "\n")
	if dir != nil {
		fi, err := dir.Root().Lstat(e.name)
		if errors.Is(err, fs.ErrNotExist) {
			dir = nil // gone since: only the reason is written, if there is room
		} else if err != nil {
			return fmt.Errorf("quarantine %s: %w", e.ref, err)
		} else if size := fi.Size() + int64(len(note)); u.entries+2 > errorsMaxEntries || u.bytes+size > errorsMaxBytes {
			// Full, or a file bigger than the room left: deleted, its
			// reason in the audit trail only.
			if err := dir.Remove(e.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("delete refused %s: %w", e.ref, err)
			}
			return nil
		} else {
			if err := dir.MoveTo(e.name, dest); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("quarantine %s: %w", e.ref, err)
			}
			u.entries++
			u.bytes += fi.Size()
		}
	}
	if dir == nil {
		if _, err := os.Lstat(dest); err != nil {
			// Nothing moved (now or before a crash): a reason alone says
			// nothing the audit trail does not.
			return nil
		}
	}
	// Whole or not at all: whoever sees the reason can read all of it.
	if err := atomicfile.Put(dest+".reason", note, 0o600); err != nil {
		return fmt.Errorf("quarantine %s: %w", e.ref, err)
	}
	u.entries++
	u.bytes += int64(len(note))
	return nil
}
