package chaos

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sample records the daemon's resident memory and open descriptors.
func (h *history) sample(pid int) {
	h.pid = pid
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

// checkFlat fails a soak whose daemon kept more descriptors or memory at
// the end than it needed once warm. Descriptors: the most open in the last
// quarter against the most in the first, with room for agents' pipes.
// Memory: Go's heap grows at first and then plateaus, and a GC cycle or
// the scavenger moves RSS by a few MiB either way, so the median of the
// last quarter is held against the median of the second (the first is
// the warm-up): at most 25% + 8 MiB more. A leak of a few KiB per agent
// run over a 30-minute soak exceeds that; noise does not.
func (h *history) checkFlat(t *testing.T) {
	if len(h.fds) < 8 || len(h.rss) < 8 {
		t.Errorf("only %d samples: too few to tell whether memory and descriptors stay flat; soak longer", len(h.rss))
		return
	}
	q := len(h.fds) / 4
	if first, last := maxOf(h.fds[:q]), maxOf(h.fds[len(h.fds)-q:]); last > first+20 {
		t.Errorf("the daemon's open file descriptors grew over the soak: %d at most in the first quarter, %d in the last; now open: %v",
			first, last, openFiles(h.pid))
	}
	q = len(h.rss) / 4
	if warm, last := median(h.rss[q:2*q]), median(h.rss[len(h.rss)-q:]); last > warm+warm/4+8 {
		t.Errorf("the daemon's memory grew over the soak: RSS median %d MiB in the second quarter, %d MiB in the last", warm, last)
	}
}

// report writes what the run did and found to the test log and, when
// CHAOS_REPORT names a file, to that file.
func (h *history) report(t *testing.T, seed uint64) {
	var b strings.Builder
	verdict := "passed"
	if t.Failed() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "chaos report: %s; %d cycles in %s (seed %d, CHAOS_SEED=%d replays the faults)\n",
		verdict, h.cycles, time.Since(h.startedAt).Round(time.Second), seed, seed)
	fmt.Fprintf(&b, "faults injected:\n")
	for _, k := range slices.Sorted(maps.Keys(h.faults)) {
		fmt.Fprintf(&b, "  %-34s %d\n", k, h.faults[k])
	}
	fmt.Fprintf(&b, "  %-34s not injected: Go reads the wall clock through the vDSO, which LD_PRELOAD fakers\n", "clock step")
	fmt.Fprintf(&b, "  %-34s miss, and a time namespace offsets only the monotonic clocks; stepping the host's\n", "")
	fmt.Fprintf(&b, "  %-34s clock would disturb everything else on the machine\n", "")
	fmt.Fprintf(&b, "checked:\n")
	for _, k := range slices.Sorted(maps.Keys(h.checked)) {
		fmt.Fprintf(&b, "  %-50s %d\n", k, h.checked[k])
	}
	fmt.Fprintf(&b, "lost %d, doubled %d\n", h.lost, h.doubled)
	if n := h.faults["database locked"]; n > 0 {
		fmt.Fprintf(&b, "database locked %d times, up to %s: of %d messages posted meanwhile, %d were refused with an error\n"+
			"  (the sender is told; none of them was answered later) and the rest accepted and answered\n",
			n, h.longestLock.Round(100*time.Millisecond), h.lockedPosts, len(h.refusedPosts))
	}
	if n := h.faults["local channel down"]; n > 0 {
		fmt.Fprintf(&b, "local channel down %d times: it took no message meanwhile, and up to %d outgoing messages\n"+
			"  waited in the outbox until it was back\n", n, h.heldMax)
	}
	b.WriteString(plot("daemon RSS, MiB, one sample a cycle", h.rss))
	b.WriteString(plot("daemon open file descriptors, one sample a cycle", h.fds))
	t.Log(b.String())
	if out := os.Getenv("CHAOS_REPORT"); out != "" {
		os.WriteFile(out, []byte(b.String()), 0o644)
	}
}

// appendReport logs line and adds it to the CHAOS_REPORT file, for the
// tests that run after TestChaos has written it.
func appendReport(t *testing.T, line string) {
	t.Log(line)
	if out := os.Getenv("CHAOS_REPORT"); out != "" {
		if f, err := os.OpenFile(out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}

// plot draws xs as bars from zero, 8 lines high and at most 64 columns
// wide (a column shows the largest sample of its stretch).
func plot(title string, xs []int) string {
	const rows, cols = 8, 64
	if len(xs) == 0 {
		return ""
	}
	per := (len(xs) + cols - 1) / cols
	var col []int
	for i := 0; i < len(xs); i += per {
		col = append(col, maxOf(xs[i:min(i+per, len(xs))]))
	}
	top := max(maxOf(col), 1)
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d samples, min %d, median %d, max %d; %d a column):\n", title, len(xs), slices.Min(xs), median(xs), top, per)
	for r := rows; r >= 1; r-- {
		label := ""
		if r == rows {
			label = strconv.Itoa(top)
		}
		fmt.Fprintf(&b, "%6s |", label)
		for _, v := range col {
			if v*rows >= r*top-top/2 { // rounded to the nearest line
				b.WriteByte('#')
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%6s +%s\n", "0", strings.Repeat("-", len(col)))
	return b.String()
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func median(xs []int) int {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

// openFiles counts a process's open descriptors by what they point at
// (a path's directory, or a kind such as pipe or socket), to show what leaks.
func openFiles(pid int) map[string]int {
	out := map[string]int{}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if kind, _, ok := strings.Cut(target, ":["); ok {
			target = kind
		} else {
			target = filepath.Dir(target)
		}
		out[target]++
	}
	return out
}
