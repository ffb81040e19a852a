package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// WatchEvery is how often a run's memory and its group's disk use are
// measured.
const WatchEvery = time.Second

// Watch measures, every WatchEvery until stop is closed, the processes
// and resident memory of the tree under pid (the sandbox and all it runs)
// and the disk use of dir, and calls over once, with what was exceeded,
// when one passes its limit. The kernel limits file size and, unless the
// daemon runs as root (whose processes RLIMIT_NPROC exempts, and a run's
// user maps to the daemon's), processes; memory and disk need a look from
// outside.
func Watch(pid int, dir string, l Limits, stop <-chan struct{}, over func(what string)) {
	if l.Processes <= 0 && l.Memory <= 0 && l.Disk <= 0 {
		return
	}
	t := time.NewTicker(WatchEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		procs, rss := Tree(pid)
		if l.Processes > 0 && procs > l.Processes {
			over(fmt.Sprintf("processes: the run has %d, over its limit of %d", procs, l.Processes))
			return
		}
		if l.Memory > 0 && rss > l.Memory {
			over(fmt.Sprintf("memory: the run's processes hold %d MiB (memfd shared memory included), over its limit of %d MiB", rss>>20, l.Memory>>20))
			return
		}
		if l.Disk > 0 {
			if used := DiskUse(dir, l.Disk); used > l.Disk {
				over(fmt.Sprintf("disk: the group's folder holds over %d MiB, its limit", l.Disk>>20))
				return
			}
		}
	}
}

// Tree counts pid and all its descendants and adds up the memory they
// hold in bytes (Linux; nothing elsewhere): what each has resident of its
// own, and, once each, every memfd one of them holds open or mapped —
// those pages are no process's resident memory until touched through a
// mapping, so a run could otherwise hold any amount of them.
func Tree(pid int) (procs int, rssBytes int64) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp := ppid(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	seen := map[[2]uint64]bool{}
	for stack := []int{pid}; len(stack) > 0; {
		p := stack[len(stack)-1]
		stack = append(stack[:len(stack)-1], children[p]...)
		procs++
		rssBytes += rss(p) + memfds(p, seen)
	}
	return procs, rssBytes
}

func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	var state string
	var pp int
	fmt.Sscan(string(b[i+1:]), &state, &pp)
	return pp
}

// rss is the resident memory of pid but its shared memory (RssShmem:
// memfds, counted whole by memfds, and /dev/shm, bounded by its size).
func rss(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	var total, shmem int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		for key, into := range map[string]*int64{"VmRSS:": &total, "RssShmem:": &shmem} {
			if kb, ok := bytes.CutPrefix(sc.Bytes(), []byte(key)); ok {
				if f := bytes.Fields(kb); len(f) > 0 {
					n, _ := strconv.ParseInt(string(f[0]), 10, 64)
					*into = n << 10
				}
			}
		}
	}
	return max(total-shmem, 0)
}

// DiskUse is the size of the files under dir but its logs/, counted until it passes
// stopAt (a group's folder can be large; past its limit the rest does not
// matter).
func DiskUse(dir string, stopAt int64) int64 {
	var used int64
	logs := filepath.Join(dir, layout.LogsDir) // the daemon's, not the group's
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if path == logs {
				return filepath.SkipDir
			}
			return nil
		}
		if fi, err := d.Info(); err == nil {
			used += fi.Size()
		}
		if used > stopAt {
			return filepath.SkipAll
		}
		return nil
	})
	return used
}
