package fit

import (
	"strings"
	"testing"
)

func TestCut(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"a  b\nc", 10, "a b c"},
		{"0123456789", 5, "0123…"},
		{"ääääää", 4, "äää…"},
		{"abc", 0, "…"},
	} {
		if got := Cut(tt.s, tt.n); got != tt.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// Wrapped text keeps every word, in order, and no line is wider than Width.
func TestWrap(t *testing.T) {
	long := strings.Repeat("x", 130)
	words := "memory: no cgroup limit (the memory controller is not delegated to the daemon's cgroup " +
		"/sys/fs/cgroup/unified (it has: \"hugetlb\"); under systemd, Delegate=yes in the service gives it); ünïcödé " + long + " end"
	got := Wrap("ok   confinement:", words, "     ")
	lines := strings.Split(got, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "ok   confinement: memory: no cgroup") {
		t.Fatalf("Wrap:\n%s", got)
	}
	for i, l := range lines {
		if Len(l) > Width {
			t.Errorf("line %d is %d wide: %q", i, Len(l), l)
		}
		if i > 0 && !strings.HasPrefix(l, "     ") {
			t.Errorf("line %d is not indented: %q", i, l)
		}
	}
	if joined := strings.Join(strings.Fields(strings.ReplaceAll(got, "\n     ", "")), " "); !strings.Contains(strings.ReplaceAll(got, "\n     ", " "), "ünïcödé") ||
		!strings.Contains(strings.ReplaceAll(got, "\n     ", ""), long) || !strings.HasSuffix(joined, "end") {
		t.Errorf("words lost or reordered:\n%s", got)
	}
	if got := Wrap("ok   node:", "v24", "     "); got != "ok   node: v24" {
		t.Errorf("a short line: %q", got)
	}
}
