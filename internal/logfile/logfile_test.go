package logfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRotating(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "nanoclawd.log")
	l, err := Open(path, 100, 2)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Repeat("x", 39) + "\n" // 40 bytes: two fit, the third rotates
	for i := 0; i < 7; i++ {
		if _, err := l.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	sizes := map[string]int{}
	for _, name := range []string{"nanoclawd.log", "nanoclawd.log.1", "nanoclawd.log.2", "nanoclawd.log.3"} {
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(path), name)); err == nil {
			sizes[name] = len(b)
		}
	}
	// 7 lines: 2 + 2 + 2 rotated away (the oldest pair dropped with keep 2), 1 current.
	want := map[string]int{"nanoclawd.log": 40, "nanoclawd.log.1": 80, "nanoclawd.log.2": 80}
	if len(sizes) != len(want) {
		t.Fatalf("files %v, want %v", sizes, want)
	}
	for k, v := range want {
		if sizes[k] != v {
			t.Errorf("%s is %d bytes, want %d", k, sizes[k], v)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("log mode %v", fi.Mode().Perm())
	}
	// Reopening appends and counts what is there.
	l, _ = Open(path, 100, 2)
	l.Write([]byte(line))
	l.Write([]byte(line))
	l.Close()
	if b, _ := os.ReadFile(path); len(b) != 40 {
		t.Errorf("after reopen the current file has %d bytes, want a fresh rotation at 40", len(b))
	}
}
