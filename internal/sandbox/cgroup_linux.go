package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MemoryCgroup finds the daemon's own cgroup v2 directory and tells
// whether runs could be given child cgroups with the memory controller,
// whose limit counts shared memory (/dev/shm, memfd) as well as what
// processes hold. It returns why not when they cannot: then the daemon
// measures resident memory from outside (Watch) and /dev/shm is bounded
// by its size.
func MemoryCgroup() (string, error) {
	rel := ""
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("no cgroups here: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			rel = p
		}
	}
	mount := cgroup2Mount()
	if rel == "" || mount == "" {
		return "", fmt.Errorf("no cgroup v2 hierarchy is mounted (the machine uses cgroup v1)")
	}
	dir := filepath.Join(mount, rel)
	ctrl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return "", fmt.Errorf("the daemon's cgroup %s cannot be read: %w", dir, err)
	}
	if !slices.Contains(strings.Fields(string(ctrl)), "memory") {
		return "", fmt.Errorf("the memory controller is not delegated to the daemon's cgroup %s (it has: %q); under systemd, Delegate=yes in the service gives it", dir, strings.TrimSpace(string(ctrl)))
	}
	probe := filepath.Join(dir, "nanoclawd-probe")
	if err := os.Mkdir(probe, 0o755); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("the daemon cannot make a child cgroup in %s: %w", dir, err)
	}
	os.Remove(probe)
	return dir, nil
}

// cgroup2Mount is where the cgroup v2 hierarchy is mounted, or "".
func cgroup2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// … mount-point … - fstype source options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if f := strings.Fields(pre); ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return f[4]
		}
	}
	return ""
}
