package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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

var delegated struct {
	sync.Mutex
	dir string // the daemon's cgroup, with memory enabled for children
	err error
}

// RunCgroup is a child cgroup of the daemon's holding one run, whose
// memory.max counts all the run's memory, shared memory included.
type RunCgroup struct {
	Dir string
	FD  int // for SysProcAttr.CgroupFD: the run starts inside it
	f   *os.File
}

// NewRunCgroup makes the cgroup of one run with its memory limit, or
// says why it cannot (then the run goes on without one: the daemon
// measures its memory from outside). The first call moves the daemon
// itself into a leaf of its own cgroup, as cgroup v2 allows controllers
// for children only of a cgroup without processes.
func NewRunCgroup(name string, limit int64) (*RunCgroup, error) {
	delegated.Lock()
	defer delegated.Unlock()
	if delegated.dir == "" && delegated.err == nil {
		delegated.dir, delegated.err = enableMemory()
	}
	if delegated.err != nil {
		return nil, delegated.err
	}
	dir := filepath.Join(delegated.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cgroup %s: %w", dir, err)
	}
	for file, v := range map[string]string{"memory.max": strconv.FormatInt(limit, 10), "memory.swap.max": "0"} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil && !os.IsNotExist(err) {
			os.Remove(dir)
			return nil, fmt.Errorf("set %s of cgroup %s: %w", file, dir, err)
		}
	}
	f, err := os.Open(dir)
	if err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("open cgroup %s: %w", dir, err)
	}
	return &RunCgroup{Dir: dir, FD: int(f.Fd()), f: f}, nil
}

// OOMKilled tells whether the kernel killed a process of the run for
// going over its memory limit.
func (c *RunCgroup) OOMKilled() bool {
	b, err := os.ReadFile(filepath.Join(c.Dir, "memory.events"))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(l, "oom_kill "); ok && n != "0" {
			return true
		}
	}
	return false
}

// Close removes the cgroup once the run's processes are gone.
func (c *RunCgroup) Close() {
	c.f.Close()
	os.Remove(c.Dir) // EBUSY while a process is left: the run's PID namespace ends them all
}

// enableMemory moves the daemon into <its cgroup>/daemon and enables the
// memory controller for the children of its cgroup.
func enableMemory() (string, error) {
	dir, err := MemoryCgroup()
	if err != nil {
		return "", err
	}
	leaf := filepath.Join(dir, "daemon")
	if err := os.Mkdir(leaf, 0o755); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("make cgroup %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return "", fmt.Errorf("move the daemon into cgroup %s: %w", leaf, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory"), 0o644); err != nil {
		return "", fmt.Errorf("enable the memory controller below %s: %w", dir, err)
	}
	return dir, nil
}
