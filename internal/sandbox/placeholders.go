package sandbox

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Placeholders keeps the empty mount points of a run's missing protected
// names (Mount.Missing) between runs, in a directory of the daemon's, and
// moves them into the group's folder before a run (Place) and back after
// it (Keep). Bubblewrap would otherwise create each in the folder at
// every start, and the daemon remove it after: on an ext4 file system
// without a journal, as here, each create looks past every inode freed in
// the last minute for a free one, and these runs free eight apiece —
// measured, 3–5 ms of bubblewrap's CPU per confined start. A rename
// allocates nothing. Only the placeholders directly in the group's folder
// move (the deeper ones, core.hooksPath directories, lie below what the
// group may have linked elsewhere); a rename that cannot be made (another
// file system) leaves them to bubblewrap and Cleanup as before.
type Placeholders struct {
	Dir string // the daemon's own, on the group folders' file system
	mu  sync.Mutex
}

// maxKept bounds the placeholders kept: enough for several runs at once.
const maxKept = 64

// Place moves a kept placeholder to each of p's missing mount points in
// its folder that is still missing.
func (k *Placeholders) Place(p Plan) {
	if k == nil || !renameWorks {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	kept, err := os.ReadDir(k.Dir)
	if err != nil {
		return
	}
	for _, m := range p.Mounts {
		if !m.Missing || filepath.Dir(m.Path) != p.Workdir {
			continue
		}
		i := firstKept(kept, m.Dir)
		if i < 0 {
			continue
		}
		from := filepath.Join(k.Dir, kept[i].Name())
		kept = append(kept[:i], kept[i+1:]...)
		if !empty(from, m.Dir) {
			continue
		}
		// Never over what is there now (the owner made it meanwhile).
		renameNoReplace(from, m.Path)
	}
}

// Keep moves the empty placeholders p's run leaves in its folder into the
// keep, and removes the others as Cleanup does.
func (k *Placeholders) Keep(p Plan) {
	if k == nil || !renameWorks {
		Cleanup(p)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	kept, _ := os.ReadDir(k.Dir)
	n := len(kept)
	for _, m := range p.Mounts {
		if !m.Missing {
			continue
		}
		if n < maxKept && filepath.Dir(m.Path) == p.Workdir && empty(m.Path, m.Dir) {
			if os.MkdirAll(k.Dir, 0o700) == nil && renameNoReplace(m.Path, filepath.Join(k.Dir, keptName(m.Dir))) == nil {
				n++
				continue
			}
		}
		cleanOne(m)
	}
}

// empty tells whether path is an empty placeholder of its kind: an empty
// directory, or an empty regular file with no other name.
func empty(path string, dir bool) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	if dir {
		if !fi.IsDir() {
			return false
		}
		entries, err := os.ReadDir(path)
		return err == nil && len(entries) == 0
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return fi.Mode().IsRegular() && fi.Size() == 0 && ok && st.Nlink == 1
}

func keptName(dir bool) string {
	if dir {
		return rand.Text() + ".dir"
	}
	return rand.Text() + ".file"
}

func firstKept(kept []os.DirEntry, dir bool) int {
	for i, e := range kept {
		if strings.HasSuffix(e.Name(), ".dir") == dir {
			return i
		}
	}
	return -1
}
