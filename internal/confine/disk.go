package confine

// The run's disk use, all of it: its group's folder, its session (HOME
// included) and IPC directories, and files its processes hold open after
// unlinking them — which no directory walk finds and which keep their
// space until the last descriptor closes. sandbox.Watch looks at the
// folder alone; a run that wrote its bulk into HOME, or into a file it
// deleted and kept open, filled the disk under a 16 MiB limit.

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// diskWatch is what the disk watch of one run keeps: when the run
// started (a file changed since is the run's) and whether what it wrote
// past its limit was removed already.
type diskWatch struct {
	start   time.Time
	trimmed atomic.Bool
}

// dirs are the directories a run's disk use is counted over.
func (c *Confinement) diskDirs() []string {
	dirs := []string{c.spec.Dir, c.spec.IPCDir}
	if home := c.spec.Env["HOME"]; home != "" {
		dirs = append(dirs, filepath.Dir(home)) // the session directory, HOME within it
	}
	return dirs
}

// watchDisk measures, every sandbox.WatchEvery until c.stop closes, the
// disk use of the run whose sandbox is pid, and stops the run once it is
// over the limit.
func (c *Confinement) watchDisk(pid int) {
	limit := c.Plan.Limits.Disk
	if limit <= 0 {
		return
	}
	dirs := c.diskDirs()
	devs := map[uint64]bool{}
	for _, d := range dirs {
		var st syscall.Stat_t
		if syscall.Stat(d, &st) == nil {
			devs[uint64(st.Dev)] = true
		}
	}
	t := time.NewTicker(sandbox.WatchEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		used := heldOpen(treePids(pid), devs)
		for _, d := range dirs {
			if used > limit {
				break
			}
			used += sandbox.DiskUse(d, limit-used)
		}
		if used > limit {
			what := fmt.Sprintf("disk: the run's files (its folder, session and IPC directories, and files it holds open) "+
				"take over %d MiB, its limit (agent.limits.diskMiB)", limit>>20)
			// Named before the kill, so the run's end says why; reported
			// after the trim, when the disk has room for the report.
			c.mu.Lock()
			first := c.over == "" // not stopped already by sandbox.Watch
			if first {
				c.over = what
			}
			c.mu.Unlock()
			syscall.Kill(-pid, syscall.SIGKILL)
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && syscall.Kill(pid, 0) == nil; {
				time.Sleep(50 * time.Millisecond)
			}
			c.trimDisk()
			if first {
				c.report(security.Violation{Time: time.Now().UTC(), Group: c.group, Kind: security.KindLimit, Tool: "sandbox", Target: "disk",
					Detail: what, Action: "blocked", Rule: "agent.limits"}, "report a run over its limit")
			}
			return
		}
	}
}

// finishDisk follows the run's end: a run stopped for its disk use (by
// this watch or sandbox.Watch's look at its folder) has what it wrote past
// its limit removed, if that was not done yet.
func (c *Confinement) finishDisk() {
	if strings.HasPrefix(c.Exceeded(), "disk") {
		c.trimDisk()
	}
}

// trimDisk, once the stopped run's processes are gone, deletes the
// biggest of the files it wrote (changed since it started) until its
// directories are back within its limit, so that a run stopped for its
// disk use leaves nothing past its limit: a full disk would otherwise stay
// full after it. Files older than the run are never touched, nor the
// daemon's logs/. It runs once per run.
func (c *Confinement) trimDisk() {
	if c.disk.trimmed.Swap(true) {
		return
	}
	limit, start, dirs := c.Plan.Limits.Disk, c.disk.start, c.diskDirs()
	type written struct {
		path string
		size int64
	}
	var files []written
	var used int64
	for _, d := range dirs {
		logs := filepath.Join(d, layout.LogsDir)
		filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if e.IsDir() {
				if path == logs {
					return filepath.SkipDir
				}
				return nil
			}
			fi, err := e.Info()
			if err != nil || !fi.Mode().IsRegular() {
				return nil
			}
			used += fi.Size()
			if !fi.ModTime().Before(start) {
				files = append(files, written{path, fi.Size()})
			}
			return nil
		})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].size > files[j].size })
	var removed []string
	var freed int64
	for _, f := range files {
		if used-freed <= limit {
			break
		}
		if os.Remove(f.path) == nil {
			removed = append(removed, f.path)
			freed += f.size
		}
	}
	if len(removed) > 0 {
		c.log.Warn().Str("group", c.group).Strs("removed", removed).Msg("removed what a run stopped for its disk use wrote past its limit")
		c.report(security.Violation{Time: time.Now().UTC(), Group: c.group, Kind: security.KindLimit, Tool: "sandbox", Target: "disk",
			Detail: fmt.Sprintf("removed %d files (%d MiB) the run wrote past its disk limit, the biggest first: %s",
				len(removed), freed>>20, strings.Join(removed[:min(len(removed), 5)], ", ")),
			Action: "blocked", Rule: "agent.limits"}, "report the files removed past the disk limit")
	}
}

// heldOpen adds up the space of the unlinked files that pids hold open on
// the devices devs (the run's /tmp is memory, counted by its own limit),
// each file once.
func heldOpen(pids []int, devs map[uint64]bool) int64 {
	var total int64
	seen := map[[2]uint64]bool{}
	for _, p := range pids {
		fdDir := "/proc/" + strconv.Itoa(p) + "/fd"
		ents, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			fd := filepath.Join(fdDir, e.Name())
			target, err := os.Readlink(fd)
			if err != nil || !strings.HasSuffix(target, " (deleted)") {
				continue
			}
			var st syscall.Stat_t
			if syscall.Stat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || !devs[uint64(st.Dev)] {
				continue
			}
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if !seen[key] {
				seen[key] = true
				total += st.Blocks * 512
			}
		}
	}
	return total
}

// treePids is pid and all its descendants (Linux; pid alone elsewhere).
func treePids(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return []int{pid}
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	for stack := []int{pid}; len(stack) > 0; {
		p := stack[len(stack)-1]
		stack = append(stack[:len(stack)-1], children[p]...)
		out = append(out, p)
	}
	return out
}

// minFreeToRun is the room a confined run needs on the disks of the data
// and groups directories to be started: below it the disk is all but
// full, and a run could only take what the daemon's reserve keeps for
// storing messages and answers. The run is retried later instead.
const minFreeToRun = 2 * store.DefaultReserve

// roomToRun refuses to start a run on a disk that is all but full.
func roomToRun(dataDir, groupsDir string) error {
	for _, d := range []string{dataDir, groupsDir} {
		free, err := store.Free(d)
		if err != nil {
			continue // not measurable here: the watch still bounds the run
		}
		if free < minFreeToRun {
			return fmt.Errorf("not starting the run: the disk of %s has %d MiB free, under the %d MiB a run needs; free some space there (it is tried again)",
				d, free>>20, minFreeToRun>>20)
		}
	}
	return nil
}
