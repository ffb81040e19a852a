package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func owner(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// HandOver gives the run what is the daemon's in its dir, but never what a
// link points at, nor logs/, nor a protected name at any depth, nor a file
// linked from elsewhere; Sweep clears setuid and setgid bits of the run's
// files only and says which.
func TestHandOverAndSweep(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("handing files to another user takes root")
	}
	u := User{DefaultRunID, DefaultRunID}
	root := t.TempDir()
	dir := filepath.Join(root, "family")
	outside := filepath.Join(root, "owners-file")
	for _, f := range []string{outside, filepath.Join(dir, "CLAUDE.md"), filepath.Join(dir, "media", "a.jpg"),
		filepath.Join(dir, "logs", "run.log"), filepath.Join(dir, "sub", ".git", "config"), filepath.Join(dir, ".envrc")} {
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink(outside, filepath.Join(dir, "link"))
	os.Link(outside, filepath.Join(dir, "hardlink"))
	if err := HandOver(dir, u, "logs"); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{
		dir: u.UID, filepath.Join(dir, "CLAUDE.md"): u.UID, filepath.Join(dir, "media"): u.UID, filepath.Join(dir, "media", "a.jpg"): u.UID,
		filepath.Join(dir, "link"): u.UID, outside: 0, filepath.Join(dir, "hardlink"): 0,
		filepath.Join(dir, "logs"): 0, filepath.Join(dir, "logs", "run.log"): 0,
		filepath.Join(dir, "sub", ".git"): 0, filepath.Join(dir, "sub", ".git", "config"): 0, filepath.Join(dir, ".envrc"): 0,
	} {
		if got := owner(t, path); got != want {
			t.Errorf("%s is uid %d after the hand-over, want %d", path, got, want)
		}
	}

	runs, roots := filepath.Join(dir, "made-setuid"), filepath.Join(dir, "roots-setuid")
	for _, f := range []string{runs, roots} {
		os.WriteFile(f, []byte("x"), 0o755)
	}
	os.Chown(runs, u.UID, u.GID) // before the chmod: a chown clears the bits
	for _, f := range []string{runs, roots} {
		os.Chmod(f, os.ModeSetuid|os.ModeSetgid|0o755)
	}
	cleared := Sweep([]string{dir}, u)
	if len(cleared) != 1 || cleared[0] != runs {
		t.Errorf("Sweep cleared %q, want only %s", cleared, runs)
	}
	if fi, _ := os.Stat(runs); fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("%s is still %v", runs, fi.Mode())
	}
	if fi, _ := os.Stat(roots); fi.Mode()&os.ModeSetuid == 0 {
		t.Errorf("Sweep touched a file that is not the run's: %v", fi.Mode())
	}
}

// Unusable names an allowWrite path the run's user cannot write, and
// Unreachable a bound path it cannot get to, each with the fix.
func TestProblemsOfARunAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs are another user only under a root daemon")
	}
	u := User{DefaultRunID, DefaultRunID}
	root := t.TempDir()
	os.Chmod(filepath.Dir(root), 0o711)
	open, closed, private := filepath.Join(root, "open"), filepath.Join(root, "closed"), filepath.Join(root, "private", "inner")
	os.MkdirAll(open, 0o777)
	os.Chmod(open, 0o777)
	os.MkdirAll(closed, 0o755)
	os.MkdirAll(private, 0o755)
	os.Chmod(filepath.Dir(private), 0o700)
	p := Plan{Mounts: []Mount{
		{Path: open, Mode: ReadWrite, Why: "allowWrite", Dir: true},
		{Path: closed, Mode: ReadWrite, Why: "allowWrite", Dir: true},
		{Path: private, Mode: ReadOnly, Why: "allowRead", Dir: true},
	}}
	bad := p.check(u)
	got := map[string]bool{}
	for _, b := range bad {
		got[b.Path] = true
		t.Logf("%s: %s", b.Path, b.Why)
	}
	if got[open] || !got[closed] || !got[private] || len(bad) != 2 {
		t.Errorf("problems %+v, want %s (not writable) and %s (unreachable, so unreadable too)", bad, closed, private)
	}
}
