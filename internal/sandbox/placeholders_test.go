//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// The mount points of missing protected names move between a run's
// folder and the keep instead of being made and removed each time; what
// is there already, or lies deeper, is never moved or replaced.
func TestPlaceholdersKeptBetweenRuns(t *testing.T) {
	group := t.TempDir()
	k := &Placeholders{Dir: filepath.Join(t.TempDir(), "placeholders")}
	git, envrc, hooks := filepath.Join(group, ".git"), filepath.Join(group, ".envrc"), filepath.Join(group, "tools", "hooks")
	p := Plan{Workdir: group, Mounts: []Mount{
		{Path: git, Mode: ReadOnly, Dir: true, Missing: true},
		{Path: envrc, Mode: ReadOnly, Missing: true},
		{Path: hooks, Mode: ReadOnly, Dir: true, Missing: true},
	}}
	bwrap := func() { // makes what is still missing, as bubblewrap does
		for _, m := range p.Mounts {
			if _, err := os.Lstat(m.Path); err == nil {
				continue
			}
			if m.Dir {
				os.MkdirAll(m.Path, 0o755)
			} else if err := os.WriteFile(m.Path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	k.Place(p) // nothing kept yet
	if _, err := os.Lstat(git); !os.IsNotExist(err) {
		t.Fatalf("a placeholder from an empty keep: %v", err)
	}
	bwrap()
	k.Keep(p)
	for _, path := range []string{git, envrc, hooks} {
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("%s left in the folder after the run: %v", path, err)
		}
	}
	if kept, _ := os.ReadDir(k.Dir); len(kept) != 2 {
		t.Fatalf("kept %v, want the two in the folder itself", kept)
	}
	k.Place(p)
	if fi, err := os.Lstat(git); err != nil || !fi.IsDir() {
		t.Errorf(".git not placed as a directory: %v", err)
	}
	if fi, err := os.Lstat(envrc); err != nil || !fi.Mode().IsRegular() || fi.Size() != 0 {
		t.Errorf(".envrc not placed as an empty file: %v", err)
	}
	if _, err := os.Lstat(hooks); !os.IsNotExist(err) {
		t.Errorf("a deeper placeholder was placed (bubblewrap makes those): %v", err)
	}
	if kept, _ := os.ReadDir(k.Dir); len(kept) != 0 {
		t.Errorf("still kept after placing: %v", kept)
	}

	// The owner fills .git after the run: it stays in the folder, whole;
	// an .envrc the owner wrote is not taken either.
	bwrap()
	os.WriteFile(filepath.Join(git, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(envrc, []byte("export A=1\n"), 0o644)
	k.Keep(p)
	if _, err := os.Stat(filepath.Join(git, "HEAD")); err != nil {
		t.Errorf("the owner's .git was moved or removed: %v", err)
	}
	if b, _ := os.ReadFile(envrc); string(b) != "export A=1\n" {
		t.Errorf("the owner's .envrc is now %q", b)
	}
	// What is there is never replaced by a kept placeholder.
	os.Mkdir(k.Dir, 0o700)
	os.Mkdir(filepath.Join(k.Dir, "spare.dir"), 0o755)
	k.Place(p)
	if _, err := os.Stat(filepath.Join(git, "HEAD")); err != nil {
		t.Errorf("a kept placeholder replaced the owner's .git: %v", err)
	}
}

// A nil keep tidies up as Cleanup does.
func TestNoPlaceholdersKept(t *testing.T) {
	group := t.TempDir()
	git := filepath.Join(group, ".git")
	os.Mkdir(git, 0o755)
	var k *Placeholders
	p := Plan{Workdir: group, Mounts: []Mount{{Path: git, Mode: ReadOnly, Dir: true, Missing: true}}}
	k.Place(p)
	k.Keep(p)
	if _, err := os.Lstat(git); !os.IsNotExist(err) {
		t.Errorf("the placeholder is still there: %v", err)
	}
}
