package ipc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

// file is one IPC file as read: its content, or why it is refused unread.
type file struct {
	ref
	data []byte
	hash string // of data; for a refused object, of its identity
	bad  string // why the object is refused unread; "" when data is the content
}

// read reads the file r names; nil, nil when it is gone (handled already).
// Its directory is opened once per batch, through groupfs: one an agent
// replaced with a link (say, to another group's messages/) is removed and
// reported, never read through.
func (v *view) read(ctx context.Context, r ref) (*file, error) {
	dir, err := v.dirs.get(ctx, r.folder, r.sub)
	if err != nil || dir == nil {
		return nil, err
	}
	data, hash, bad, err := readIPCFile(dir, r.name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &file{ref: r, data: data, hash: hash, bad: bad}, nil
}

// dirs opens the directories of one batch, each once, through groupfs:
// one an agent replaced with a link is removed and reported, never
// followed, and counts as not there.
type dirs struct {
	w *Watcher
	m map[[2]string]dirAnswer // by (folder, sub)
}

type dirAnswer struct {
	dir *groupfs.Dir // nil: not there
	err error
}

func (w *Watcher) newDirs() *dirs { return &dirs{w: w, m: map[[2]string]dirAnswer{}} }

// get opens folder's directory sub; nil, nil when there is none.
func (ds *dirs) get(ctx context.Context, folder, sub string) (*groupfs.Dir, error) {
	key := [2]string{folder, sub}
	a, opened := ds.m[key]
	if !opened {
		top, err := ds.w.ipcDir(folder)
		if err != nil {
			return nil, err
		}
		a.dir, a.err = top.Existing(ctx, sub)
		top.Close()
		ds.m[key] = a
	}
	return a.dir, a.err
}

// close releases the directories opened.
func (ds *dirs) close() {
	for _, a := range ds.m {
		if a.dir != nil {
			a.dir.Close()
		}
	}
}

// readIPCFile reads name in dir without following a symlink or blocking on
// a FIFO. bad is set, and nothing read, for anything but a regular file of
// at most protocol.MaxFileSize; hash then identifies that object instead of content.
func readIPCFile(dir *groupfs.Dir, name string) (data []byte, hash, bad string, err error) {
	path := filepath.Join(dir.Path(), name) // for messages
	fi, err := dir.Root().Lstat(name)
	if err != nil {
		return nil, "", "", err
	}
	ident := func() string {
		id := fmt.Sprintf("%s:%d:%d", fi.Mode().Type(), fi.Size(), fi.ModTime().UnixNano())
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			id += fmt.Sprintf(":%d", st.Ino)
		}
		return "nonregular:" + id
	}
	if !fi.Mode().IsRegular() {
		return nil, ident(), fmt.Sprintf("not a regular file (%s); write files with the nanoclaw MCP tools", groupfs.Kind(fi.Mode())), nil
	}
	if fi.Size() > protocol.MaxFileSize {
		return nil, ident(), fmt.Sprintf("file of %d bytes is over the 1 MiB limit", fi.Size()), nil
	}
	f, err := dir.Root().OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENXIO) {
			return nil, ident(), "replaced while being read", nil
		}
		return nil, "", "", err
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil || !os.SameFile(fi, ofi) {
		return nil, ident(), "replaced while being read", nil
	}
	// One read(2) takes a file as long as fstat said; the byte to spare
	// tells one that grew since, which is read on up to the limit.
	data = make([]byte, ofi.Size()+1)
	n, err := io.ReadAtLeast(f, data, int(ofi.Size()))
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, "", "", fmt.Errorf("read %s: %w", path, err)
	}
	data = data[:n]
	if n > int(ofi.Size()) {
		rest, err := io.ReadAll(io.LimitReader(f, protocol.MaxFileSize+1-int64(n)))
		if err != nil {
			return nil, "", "", fmt.Errorf("read %s: %w", path, err)
		}
		data = append(data, rest...)
	}
	if len(data) > protocol.MaxFileSize {
		return nil, ident(), "file grew over the 1 MiB limit while being read", nil
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:]), "", nil
}
