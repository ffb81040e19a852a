package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Mark identifies an agent's process group across a daemon crash: the
// group id, the leader's start time (clock ticks since boot) and the boot.
// A kill -9 of the daemon takes the agent with it (Pdeathsig) but not what
// the agent started; the next start uses the mark to end those.
type Mark struct {
	PGID   int
	Start  uint64
	BootID string
}

// MarkOf reads the mark of a running agent (pid = its process group id).
func MarkOf(pid int) (Mark, bool) {
	start, ok := procStart(pid)
	if !ok {
		return Mark{}, false
	}
	return Mark{PGID: pid, Start: start, BootID: bootID()}, true
}

// KillLeftovers SIGKILLs every process still in the marked group. Only
// processes started no earlier than the leader, in the same boot, count:
// a group id is not reused while any member lives, so those are the agent's.
// It returns how many it killed.
func KillLeftovers(m Mark) int {
	if m.PGID <= 1 || m.BootID == "" || m.BootID != bootID() {
		return 0
	}
	killed := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		pgrp, start, ok := procStat(pid)
		if ok && pgrp == m.PGID && start >= m.Start {
			if syscall.Kill(pid, syscall.SIGKILL) == nil {
				killed++
			}
		}
	}
	return killed
}

func bootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

func procStart(pid int) (uint64, bool) {
	_, start, ok := procStat(pid)
	return start, ok
}

// procStat reads the process group (field 5) and start time (field 22) of
// /proc/<pid>/stat; the command name (field 2) may hold spaces and ")".
func procStat(pid int) (pgrp int, start uint64, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state).
	if len(f) < 20 {
		return 0, 0, false
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	return pgrp, start, err1 == nil && err2 == nil
}
