// Package atomicfile replaces a file's contents all at once: a reader (the
// daemon, an agent, a status command) sees the old file or the new one,
// never half of either, also after a crash in the middle of the write.
package atomicfile

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data, with exactly the permission bits mode
// (the umask does not apply). It writes a new file beside path, named
// ".<random>.<base>.tmp" (so an IPC file is written as *.json.tmp, as the
// IPC protocol has it, which no reader of *.json picks up), syncs it to disk
// and renames it over path. The sync before the rename is what keeps a
// crash from leaving an empty file under path's name. A symlink at path is
// replaced, never followed. On error path is unchanged and the temp file
// is gone.
func Write(path string, data []byte, mode fs.FileMode) error {
	dir, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer dir.Close()
	if err := WriteIn(dir, filepath.Base(path), data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// WriteIn is Write for name inside root: for directories someone else may
// write to (an agent's IPC directory), where a symlink planted anywhere on
// the way must not send the write outside root.
func WriteIn(root *os.Root, name string, data []byte, mode fs.FileMode) error {
	return write(root, name, bytes.NewReader(data), mode, true)
}

// Put is Write without the sync: the file is still replaced all at once,
// so no reader sees half of it, but a power cut may leave it empty. It is
// for files that only matter while the daemon runs and are written again
// after a start — an IPC verdict, a follow-up for a running agent, the
// snapshots an agent reads — where the sync cost a millisecond on every
// tool call and message.
func Put(path string, data []byte, mode fs.FileMode) error {
	dir, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer dir.Close()
	if err := write(dir, filepath.Base(path), bytes.NewReader(data), mode, false); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// PutIn is Put for name inside root, as WriteIn is for Write.
func PutIn(root *os.Root, name string, data []byte, mode fs.FileMode) error {
	return write(root, name, bytes.NewReader(data), mode, false)
}

// CopyIn is WriteIn for contents read from r, for files too large to
// hold in memory (a restore).
func CopyIn(root *os.Root, name string, r io.Reader, mode fs.FileMode) error {
	return write(root, name, r, mode, true)
}

func write(root *os.Root, name string, data io.Reader, mode fs.FileMode, sync bool) error {
	tmp := filepath.Join(filepath.Dir(name), "."+rand.Text()[:10]+"."+filepath.Base(name)+".tmp")
	// O_EXCL: a name planted in advance (a symlink) fails instead of being
	// written through; 0600 until the data is complete.
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, data) // one Write for a bytes.Reader
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		root.Remove(tmp)
	}
	return err
}
