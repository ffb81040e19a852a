package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// What a run owns on the host when it is another user than the daemon's,
// and what it may not leave behind. Everything here acts through an
// os.Root on the real directory: a group can plant links in its own dirs,
// and none of them is ever followed.

// Shield makes the daemon's dirs private: dataDir, groupsDir and the
// parents of the runs' dirs (sessions/, ipc/, gw/) are 0700, or, when runs
// are another user, 0710 with the run's group, so that bubblewrap, started
// as that user, can pass through them to the run's own dirs (it cannot
// list them, and the run itself never sees them).
func Shield(l layout.Layout, u User) error {
	for _, d := range []string{l.DataDir, l.GroupsDir, l.Sessions(), l.IPCRoot(), l.Gateways()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("make %s: %w", d, err)
		}
		mode := os.FileMode(0o700)
		if u.Switches() {
			mode = 0o710
			if err := os.Chown(d, -1, u.GID); err != nil {
				return fmt.Errorf("give %s to group %d (the runs' group): %w", d, u.GID, err)
			}
		}
		if err := os.Chmod(d, mode); err != nil {
			return fmt.Errorf("make %s private (%v): %w", d, mode, err)
		}
	}
	return nil
}

// HandOver gives dir and what lies in it to the run's user u, so the run
// can write its own folder, session and IPC directory: what the daemon's
// user owns (the memory file, media, snapshots, an earlier install's files)
// is chowned, a link itself and never what it points to. Names the group
// may not change keep their owner: keep at the top, ProtectedAnywhere at
// any depth. A file with more than one link is not only the group's and is
// left alone. Nothing happens when runs are the daemon's own user.
func HandOver(dir string, u User, keep ...string) error {
	if !u.Switches() {
		return nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("hand %s to the run's user: %w", dir, err)
	}
	defer root.Close()
	if err := root.Chmod(".", 0o700); err != nil {
		return fmt.Errorf("hand %s to the run's user: %w", dir, err)
	}
	daemon := os.Geteuid()
	return fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone meanwhile, or unreadable: not ours to give
		}
		if name != "." && (slices.Contains(keep, name) || slices.Contains(ProtectedAnywhere, d.Name())) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) != daemon || (!fi.IsDir() && st.Nlink > 1) {
			return nil
		}
		if err := root.Lchown(name, u.UID, u.GID); err != nil {
			return fmt.Errorf("hand %s to uid %d: %w", filepath.Join(dir, name), u.UID, err)
		}
		return nil
	})
}

// Sweep clears the setuid and setgid bits of every file under dirs that
// u owns, and returns the paths it cleared. The seccomp filter refuses
// to set them; this is what catches any way around it.
func Sweep(dirs []string, u User) []string {
	var cleared []string
	for _, dir := range dirs {
		root, err := os.OpenRoot(dir)
		if err != nil {
			continue
		}
		fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			if fi, err := d.Info(); err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				if clearSetID(root, name, u) {
					cleared = append(cleared, filepath.Join(dir, name))
				}
			}
			return nil
		})
		root.Close()
	}
	return cleared
}

// clearSetID clears the bits on the file itself, opened without following
// a link, if it is a regular file of u's.
func clearSetID(root *os.Root, name string, u User) bool {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) == 0 {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != u.UID {
		return false // not the run's: a hard link to someone else's file
	}
	return f.Chmod(fi.Mode()&^(fs.ModeSetuid|fs.ModeSetgid)) == nil
}

// Problem is a path a run as some user cannot use as its plan says, and
// the fix.
type Problem struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// Unreachable lists the mounts of p that bubblewrap, started as u, cannot
// reach: it resolves every source path as that user.
func (p Plan) Unreachable(u User) []Problem {
	if !u.Switches() {
		return nil
	}
	var out []Problem
	for _, m := range p.Mounts {
		if (m.Mode == ReadOnly && !m.Missing && m.Link == "") || m.Mode == ReadWrite {
			if why := reach(m.Path, u); why != "" {
				out = append(out, Problem{m.Path, why})
			}
		}
	}
	return out
}

// Unusable lists the allowRead and allowWrite paths of p that a run as u
// could not read, or write, although they are bound for it.
func (p Plan) Unusable(u User) []Problem {
	var out []Problem
	for _, m := range p.Mounts {
		if m.Why != "allowWrite" && m.Why != "allowRead" {
			continue
		}
		if why := reach(m.Path, u); why != "" {
			out = append(out, Problem{m.Path, why})
			continue
		}
		fi, err := os.Stat(m.Path)
		if err != nil {
			continue
		}
		need, what := fs.FileMode(4), "readable"
		if m.Mode == ReadWrite {
			need, what = 2, "writable"
		}
		if fi.IsDir() {
			need |= 1
		}
		if access(fi, u)&need != need {
			out = append(out, Problem{m.Path, fmt.Sprintf("not %s by the runs' user (uid %d): chown -R %d:%d %s, or grant it access", what, u.UID, u.UID, u.GID, m.Path)})
		}
	}
	return out
}

// check is every problem of p for a run as u, each path once.
func (p Plan) check(u User) []Problem {
	out := p.Unreachable(u)
	for _, pr := range p.Unusable(u) {
		if !slices.ContainsFunc(out, func(o Problem) bool { return o.Path == pr.Path }) {
			out = append(out, pr)
		}
	}
	return out
}

// reach says why u cannot get to path (every directory above it needs
// search permission), or "".
func reach(path string, u User) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && access(fi, u)&1 == 0 {
			return fmt.Sprintf("%s is not searchable by uid %d: chmod o+x %s, or give it to group %d with g+x", d, u.UID, d, u.GID)
		}
		if d == "/" || d == "." {
			return ""
		}
	}
}

// access is the rwx bits (4, 2, 1) fi grants u.
func access(fi fs.FileInfo, u User) fs.FileMode {
	st, ok := fi.Sys().(*syscall.Stat_t)
	perm := fi.Mode().Perm()
	switch {
	case u.UID == 0:
		return 7
	case !ok:
		return perm & 7
	case int(st.Uid) == u.UID:
		return perm >> 6 & 7
	case int(st.Gid) == u.GID:
		return perm >> 3 & 7
	}
	return perm & 7
}
