package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mode is the mode of the plan's mount of path, or "".
func mode(p Plan, path string) string {
	i := slices.IndexFunc(p.Mounts, func(m Mount) bool { return m.Path == path && m.Mode != ReadWrite })
	if i < 0 {
		return ""
	}
	return p.Mounts[i].Mode
}

// denyRead "**/" globs cut out of the group's own folder too, and a
// padded writable tree never drops a cut-out silently: the plan names it
// Unchecked and no run is started from it, with the fix in the error.
func TestCutOutsHoldInAPaddedFolder(t *testing.T) {
	root, in := world(t)
	env := filepath.Join(in.GroupDir, "app", ".env")
	os.MkdirAll(filepath.Dir(env), 0o755)
	os.WriteFile(env, []byte("TOKEN=x"), 0o644)
	nested := filepath.Join(in.GroupDir, "zz", "repo", ".git")
	os.MkdirAll(nested, 0o755)

	p := New(in)
	if mode(p, env) != Hidden || mode(p, nested) != ReadOnly || len(p.Unchecked) != 0 {
		t.Fatalf("unpadded: %s is %q, %s is %q, unchecked %v; want hidden, read-only, none", env, mode(p, env), nested, mode(p, nested), p.Unchecked)
	}

	// Past the walk's bound (made small here): pad the folder so that a
	// walk in name order runs out before app/ and zz/.
	defer func(n int) { maxWalk = n }(maxWalk)
	maxWalk = 500
	pad := filepath.Join(in.GroupDir, "a-pad")
	os.MkdirAll(pad, 0o755)
	for i := 0; i <= maxWalk; i++ {
		f, err := os.Create(filepath.Join(pad, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	p = New(in)
	if !slices.Contains(p.Unchecked, in.GroupDir) {
		t.Fatalf("padded: unchecked %v, want %s", p.Unchecked, in.GroupDir)
	}
	_, err := Command(p, RunUser(User{DefaultRunID, DefaultRunID}), []string{"/bin/true"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "remove files there") {
		t.Errorf("a padded folder starts a run (%v); want it refused with the fix", err)
	}
	// A read-only tree around a writable one is walked without it: the
	// padding does not reach the home's own cut-outs.
	in.AllowWrite = []string{filepath.Join(root, "home", "docs")}
	os.Rename(pad, filepath.Join(root, "home", "docs", "a-pad"))
	p = New(in)
	if mode(p, filepath.Join(root, "home/docs/.env")) != Hidden || !slices.Contains(p.Unchecked, filepath.Join(root, "home", "docs")) {
		t.Errorf("home/docs/.env is %q, unchecked %v", mode(p, filepath.Join(root, "home/docs/.env")), p.Unchecked)
	}
}

// The directories git runs hooks from are read-only for the run: a
// repository's core.hooksPath inside the folder (in the folder's own
// repository, in one above it, in a nested one), whether it exists yet or
// not, and the hook managers' .githooks and .husky.
func TestHookDirsAreReadOnly(t *testing.T) {
	root, in := world(t)
	g := in.GroupDir
	os.WriteFile(filepath.Join(g, ".git", "config"), []byte("[core]\n\tbare = false\n\tHooksPath = tools/hooks\n"), 0o644)
	os.MkdirAll(filepath.Join(g, "tools", "hooks"), 0o755)
	os.MkdirAll(filepath.Join(g, "sub", ".git"), 0o755)
	os.WriteFile(filepath.Join(g, "sub", ".git", "config"), []byte("[core]\nhooksPath = \"../later/hooks\"\n"), 0o644)
	os.MkdirAll(filepath.Join(root, "groups", ".git"), 0o755) // a repository above the folder
	os.WriteFile(filepath.Join(root, "groups", ".git", "config"), []byte("[core]\nhooksPath = family/up-hooks\n"), 0o644)
	os.MkdirAll(filepath.Join(g, "deep", ".husky"), 0o755)

	p := New(in)
	for _, d := range []string{"tools/hooks", "later/hooks", "up-hooks", ".githooks", ".husky", "deep/.husky"} {
		if got := mode(p, filepath.Join(g, d)); got != ReadOnly {
			t.Errorf("%s: mount %q, want read-only", d, got)
		}
	}
}
