package sandbox

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// memfds adds up the memory of the memfds pid holds open (its fds) or
// mapped (its maps; read through map_files, which takes the daemon's
// privileges), each (device, inode) once across the run: the pages they
// have, not the size they claim (a sparse one costs nothing).
func memfds(pid int, seen map[[2]uint64]bool) int64 {
	var total int64
	count := func(path string) {
		var st syscall.Stat_t
		if syscall.Stat(path, &st) != nil {
			return
		}
		key := [2]uint64{uint64(st.Dev), st.Ino}
		if !seen[key] {
			seen[key] = true
			total += st.Blocks * 512
		}
	}
	proc := "/proc/" + strconv.Itoa(pid)
	if fds, err := os.ReadDir(proc + "/fd"); err == nil {
		for _, fd := range fds {
			p := proc + "/fd/" + fd.Name()
			if link, err := os.Readlink(p); err == nil && strings.HasPrefix(link, "/memfd:") {
				count(p)
			}
		}
	}
	f, err := os.Open(proc + "/maps")
	if err != nil {
		return total
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && strings.HasPrefix(fields[5], "/memfd:") {
			count(proc + "/map_files/" + fields[0])
		}
	}
	return total
}
