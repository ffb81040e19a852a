// Package groupfstest plants what a hostile group leaves for the daemon:
// a canary directory of the host's, and links to it where the daemon keeps
// a directory or a file; then it tells whether the daemon touched the
// canary through them.
package groupfstest

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Canary is a host directory with files that must come through untouched.
type Canary struct {
	Dir  string
	want map[string]state
}

type state struct {
	data  string
	mode  fs.FileMode
	mtime time.Time
}

// NewCanary makes a canary directory (mode 0755) holding a few files, all
// an hour old — older than anything the daemon prunes — and one .json
// file, the name the IPC watcher looks for.
func NewCanary(tb testing.TB) *Canary {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "canary")
	c := &Canary{Dir: dir, want: map[string]state{}}
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for name, mode := range map[string]fs.FileMode{"precious.db": 0o600, "notes.txt": 0o644, "req.json": 0o644, "_close": 0o644} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("canary "+name+"\n"), mode); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			tb.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			tb.Fatal(err)
		}
	}
	for _, p := range append([]string{"."}, "precious.db", "notes.txt", "req.json", "_close") {
		c.want[p] = c.state(tb, p)
	}
	return c
}

func (c *Canary) state(tb testing.TB, name string) state {
	tb.Helper()
	p := filepath.Join(c.Dir, name)
	fi, err := os.Lstat(p)
	if err != nil {
		tb.Fatalf("canary %s: %v", name, err)
	}
	s := state{mode: fi.Mode(), mtime: fi.ModTime()}
	if fi.Mode().IsRegular() {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		s.data = string(b)
	}
	return s
}

// Intact fails tb unless every canary file is there with its content,
// mode and mtime, the directory keeps its mode, and nothing was added.
func (c *Canary) Intact(tb testing.TB) {
	tb.Helper()
	ents, err := os.ReadDir(c.Dir)
	if err != nil {
		tb.Fatalf("canary directory: %v", err)
	}
	for _, e := range ents {
		if _, ok := c.want[e.Name()]; !ok {
			tb.Errorf("the daemon wrote %s into the canary directory through a link", e.Name())
		}
	}
	for name, want := range c.want {
		if _, err := os.Lstat(filepath.Join(c.Dir, name)); err != nil {
			tb.Errorf("canary %s: %v (the daemon removed it through a link)", name, err)
			continue
		}
		got := c.state(tb, name)
		if got.mode != want.mode {
			tb.Errorf("canary %s: mode %v, was %v (chmodded through a link)", name, got.mode, want.mode)
		}
		if name != "." && (got.data != want.data || !got.mtime.Equal(want.mtime)) {
			tb.Errorf("canary %s: changed through a link (%q at %v, was %q at %v)", name, got.data, got.mtime, want.data, want.mtime)
		}
	}
}

// Link replaces path (whatever is there) with a symlink to the canary
// directory, or with target when given.
func (c *Canary) Link(tb testing.TB, path string, target ...string) {
	tb.Helper()
	to := c.Dir
	if len(target) > 0 {
		to = target[0]
	}
	if err := os.RemoveAll(path); err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(to, path); err != nil {
		tb.Fatal(err)
	}
}

// IsRealDir fails tb unless path is a directory, not a link.
func IsRealDir(tb testing.TB, path string) {
	tb.Helper()
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		tb.Errorf("%s is not a real directory after the daemon dealt with the link (%v, %v)", path, fi, err)
	}
}

// WaitRealDir waits (up to 20 s) until path is a directory, not a link:
// until the daemon dealt with a link planted there.
func WaitRealDir(tb testing.TB, path string) {
	tb.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s is still not a real directory after 20 s", path)
		}
	}
}

// Reporter records violations (security.Reporter).
type Reporter struct {
	mu   sync.Mutex
	list []security.Violation
}

// Report implements security.Reporter.
func (r *Reporter) Report(_ context.Context, v security.Violation) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, v)
	return nil
}

// Got is what was reported.
func (r *Reporter) Got() []security.Violation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]security.Violation(nil), r.list...)
}

// Reported fails tb unless exactly one blocked filesystem violation names
// target (the path the link was at).
func (r *Reporter) Reported(tb testing.TB, target string) {
	tb.Helper()
	n := 0
	for _, v := range r.Got() {
		if v.Target == target {
			n++
			if v.Kind != security.KindFilesystem || v.Action != "blocked" {
				tb.Errorf("the link at %s was reported as %s/%s, want filesystem/blocked", target, v.Kind, v.Action)
			}
		}
	}
	if n != 1 {
		tb.Errorf("the link at %s was reported %d times, want once; all: %+v", target, n, r.Got())
	}
}
