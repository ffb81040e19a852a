package chaos

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func (h *history) sample(pid int) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.Atoi(strings.Fields(v)[0])
				h.rss = append(h.rss, kb/1024)
			}
		}
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		h.fds = append(h.fds, len(fds))
	}
}

func (h *history) report(t *testing.T, cycles int, seed uint64) {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos report: %d cycles in %s (seed %d)\n", cycles, time.Since(h.startedAt).Round(time.Second), seed)
	for k, v := range h.faults {
		fmt.Fprintf(&b, "  fault %-24s %d\n", k, v)
	}
	fmt.Fprintf(&b, "  daemon RSS MiB per cycle: %v\n", h.rss)
	fmt.Fprintf(&b, "  daemon open FDs per cycle: %v\n", h.fds)
	t.Log(b.String())
	if out := os.Getenv("CHAOS_REPORT"); out != "" {
		os.WriteFile(out, []byte(b.String()), 0o644)
	}
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
