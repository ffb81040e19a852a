// Package groupfs is how the daemon works inside a directory a group can
// write: its IPC directory, its folder and its session directory. The
// group's agent may swap anything there for a symlink at any moment, so a
// path string the daemon builds there may lead anywhere on the host (a
// verdict prune deleting in the data dir, a chmod of /etc). Every such
// operation goes through a Dir instead: an os.Root on the real directory,
// whose operations never resolve outside it, and whose subdirectories are
// checked without following a link. A link (or any other non-directory)
// where the daemon keeps a directory is removed, never followed, reported
// as a filesystem violation, and a fresh directory takes its place, so the
// group goes on working.
//
// The top directory itself (<dataDir>/ipc/<folder>, <groupsDir>/<folder>,
// <dataDir>/sessions/<folder>) lies in a directory no group can write, so
// it is opened by path: a link there can only be the owner's (a group's
// folder kept elsewhere) and is followed.
package groupfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Rule names what refused a link in a violation: no configuration allows
// the daemon to follow one.
const Rule = "links"

// Tool is the violation's tool: the daemon itself refused.
const Tool = "nanoclawd"

// Dir is a directory a group can write, held open as an os.Root.
type Dir struct {
	root  *os.Root
	path  string
	group string
	rep   security.Reporter
}

// Open opens top, a group's directory the daemon made (its folder, IPC or
// session directory), making it (and its parents) with perm when missing.
// group is the folder named in violations; rep records them (nil: the link
// is still removed, nothing is recorded — for CLI commands without the
// daemon's reporter).
func Open(top, group string, perm fs.FileMode, rep security.Reporter) (*Dir, error) {
	if err := os.MkdirAll(top, perm); err != nil {
		return nil, fmt.Errorf("create %s: %w", top, err)
	}
	root, err := os.OpenRoot(top)
	if err != nil {
		return nil, err
	}
	return &Dir{root: root, path: top, group: group, rep: rep}, nil
}

// OpenSub is Open of filepath.Dir(path) followed by Sub of its base name:
// for a caller that holds the path of a directory inside the top one.
func OpenSub(ctx context.Context, path, group string, perm fs.FileMode, rep security.Reporter) (*Dir, error) {
	top, err := Open(filepath.Dir(path), group, perm, rep)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	return top.Sub(ctx, filepath.Base(path), perm)
}

// Close releases the directory.
func (d *Dir) Close() error { return d.root.Close() }

// Path is the directory's path (for messages; never opened again by it).
func (d *Dir) Path() string { return d.path }

// Root is the os.Root of the directory, for atomicfile's *In functions.
func (d *Dir) Root() *os.Root { return d.root }

// Sub opens name, a direct child, as a real directory, making it with perm
// when missing. Whatever else is there — a symlink above all — is removed
// without being followed, reported, and replaced by a new directory.
func (d *Dir) Sub(ctx context.Context, name string, perm fs.FileMode) (*Dir, error) {
	return d.sub(ctx, name, perm, true)
}

// Existing is Sub without making the directory: nil, nil when name is
// missing, or was something else (removed and reported).
func (d *Dir) Existing(ctx context.Context, name string) (*Dir, error) {
	return d.sub(ctx, name, 0, false)
}

func (d *Dir) sub(ctx context.Context, name string, perm fs.FileMode, create bool) (*Dir, error) {
	if err := local(name); err != nil {
		return nil, err
	}
	// A few tries: a directory swapped for a link between the check and
	// the open is caught by the identity check and dealt with again.
	last := errors.New("it kept changing while nanoclawd opened it")
	for try := 0; try < 3; try++ {
		fi, err := d.root.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if !create {
				return nil, nil
			}
			if err := d.root.Mkdir(name, perm); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("create %s: %w", d.join(name), err)
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("look at %s: %w", d.join(name), err)
		case !fi.IsDir():
			if err := d.refuse(ctx, name, fi, "a directory"); err != nil {
				return nil, err
			}
			if !create {
				return nil, nil
			}
			continue
		}
		// os.Root never leaves d; the identity check makes sure it opened
		// the very directory Lstat saw, not a link put there since.
		r, err := d.root.OpenRoot(name)
		if err != nil {
			last = err
			continue
		}
		if ofi, err := r.Stat("."); err == nil && os.SameFile(fi, ofi) {
			return &Dir{root: r, path: d.join(name), group: d.group, rep: d.rep}, nil
		}
		r.Close()
	}
	return nil, fmt.Errorf("open %s: %w", d.join(name), last)
}

// refuse removes the non-directory at name (unlinkat: a link is removed
// itself, never followed) and reports it as a filesystem violation.
func (d *Dir) refuse(ctx context.Context, name string, fi fs.FileInfo, want string) error {
	what := Kind(fi.Mode())
	if fi.Mode()&fs.ModeSymlink != 0 {
		if to, err := d.root.Readlink(name); err == nil {
			what = fmt.Sprintf("symlink to %q", to)
		}
	}
	if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the %s at %s: %w", Kind(fi.Mode()), d.join(name), err)
	}
	if d.rep == nil {
		return nil
	}
	v := security.Violation{Time: time.Now().UTC(), Group: d.group, Kind: security.KindFilesystem, Tool: Tool,
		Target: d.join(name), Action: "blocked", Rule: Rule,
		Detail: fmt.Sprintf("%s was a %s where nanoclawd keeps %s; nanoclawd removed it without following it", d.join(name), what, want)}
	if err := d.rep.Report(ctx, v); err != nil {
		return fmt.Errorf("report the %s at %s: %w", what, d.join(name), err)
	}
	return nil
}

// checkFile removes and reports a symlink at name, so that what follows
// acts on a file of this directory; a missing name is fine.
func (d *Dir) checkFile(ctx context.Context, name string) error {
	if err := local(name); err != nil {
		return err
	}
	fi, err := d.root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return d.refuse(ctx, name, fi, "a file")
	}
	return nil
}

// Names lists the directory's entries, in no order.
func (d *Dir) Names() ([]string, error) {
	f, err := d.root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", d.path, err)
	}
	return names, nil
}

// Entries lists the directory, with each entry's own Lstat (never
// followed).
func (d *Dir) Entries() ([]fs.FileInfo, error) {
	names, err := d.Names()
	if err != nil {
		return nil, err
	}
	out := make([]fs.FileInfo, 0, len(names))
	for _, n := range names {
		if fi, err := d.root.Lstat(n); err == nil {
			out = append(out, fi)
		}
	}
	return out, nil
}

// Remove removes name (a file, or a link itself); a missing one is fine.
func (d *Dir) Remove(name string) error {
	if err := d.root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", d.join(name), err)
	}
	return nil
}

// RemoveFiles removes every entry that is not a directory and for which
// drop says so (nil: all of them); it returns how many went.
func (d *Dir) RemoveFiles(drop func(fs.FileInfo) bool) (int, error) {
	ents, err := d.Entries()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, fi := range ents {
		if fi.IsDir() || (drop != nil && !drop(fi)) {
			continue
		}
		if err := d.Remove(fi.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Chmod sets the directory's own mode.
func (d *Dir) Chmod(mode fs.FileMode) error {
	if err := d.root.Chmod(".", mode); err != nil {
		return fmt.Errorf("chmod %s: %w", d.path, err)
	}
	return nil
}

// Put replaces name with data all at once (atomicfile.PutIn); a link at
// name is replaced, never written through.
func (d *Dir) Put(name string, data []byte, mode fs.FileMode) error {
	if err := local(name); err != nil {
		return err
	}
	if err := atomicfile.PutIn(d.root, name, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", d.join(name), err)
	}
	return nil
}

// Create writes data to name unless a file is there already; created says
// whether it did. A link at name is removed and reported first.
func (d *Dir) Create(ctx context.Context, name string, data []byte, mode fs.FileMode) (created bool, err error) {
	if err := d.checkFile(ctx, name); err != nil {
		return false, err
	}
	// O_EXCL never follows a link planted since the check.
	f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create %s: %w", d.join(name), err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("write %s: %w", d.join(name), err)
	}
	return true, nil
}

// OpenFile opens name with flag in the directory; a link at name is
// removed and reported first, and os.Root keeps one planted since inside
// the directory.
func (d *Dir) OpenFile(ctx context.Context, name string, flag int, perm fs.FileMode) (*os.File, error) {
	if err := d.checkFile(ctx, name); err != nil {
		return nil, err
	}
	return d.root.OpenFile(name, flag, perm)
}

// MoveTo moves name (whatever it is: a link or FIFO is moved, not followed
// or opened) to path, a file of a directory of the daemon's own.
func (d *Dir) MoveTo(name, path string) error {
	if err := local(name); err != nil {
		return err
	}
	dir, err := d.root.Open(".")
	if err != nil {
		return err
	}
	defer dir.Close()
	// renameat from the directory's own descriptor: the name is looked up
	// in the real directory, whatever its path leads to by now.
	if err := unix.Renameat(int(dir.Fd()), name, unix.AT_FDCWD, path); err != nil {
		return &os.LinkError{Op: "rename", Old: d.join(name), New: path, Err: err}
	}
	return nil
}

func (d *Dir) join(name string) string { return filepath.Join(d.path, name) }

// local refuses names that are not a single entry of the directory: every
// operation here acts on a direct child, whose parent is checked.
func local(name string) error {
	if name == "" || name == "." || strings.ContainsRune(name, filepath.Separator) || !filepath.IsLocal(name) {
		return fmt.Errorf("groupfs: %q is not a name inside the directory", name)
	}
	return nil
}

// Kind names the type of a file for a message: symlink, FIFO, directory…
func Kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m.IsRegular():
		return "file"
	}
	return m.Type().String()
}
