package groupfs_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/testkit/groupfstest"
)

var ctx = context.Background()

func open(t *testing.T, rep security.Reporter) (*groupfs.Dir, string) {
	t.Helper()
	top := filepath.Join(t.TempDir(), "family")
	d, err := groupfs.Open(top, "family", 0o700, rep)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, top
}

// A link where a directory belongs is removed, reported once, and a real
// directory takes its place; what is then done in it (write, prune, clear,
// chmod) stays in it.
func TestSubReplacesALink(t *testing.T) {
	c := groupfstest.NewCanary(t)
	rep := &groupfstest.Reporter{}
	d, top := open(t, rep)
	c.Link(t, filepath.Join(top, "results"))
	sub, err := d.Sub(ctx, "results", 0o700)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Put("a.json", []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sub.Chmod(0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.RemoveFiles(nil); err != nil {
		t.Fatal(err)
	}
	c.Intact(t)
	groupfstest.IsRealDir(t, filepath.Join(top, "results"))
	rep.Reported(t, filepath.Join(top, "results"))
	v := rep.Got()[0]
	if v.Group != "family" || v.Rule != groupfs.Rule || !strings.Contains(v.Detail, c.Dir) {
		t.Errorf("violation %+v: want group family, rule %s, the link's target in the detail", v, groupfs.Rule)
	}
	// Once dealt with, the same directory is no news.
	again, err := d.Sub(ctx, "results", 0o700)
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if n := len(rep.Got()); n != 1 {
		t.Errorf("%d reports after a second Sub, want 1", n)
	}
}

func TestExistingRemovesALinkAndMakesNothing(t *testing.T) {
	c := groupfstest.NewCanary(t)
	rep := &groupfstest.Reporter{}
	d, top := open(t, rep)
	if sub, err := d.Existing(ctx, "results"); sub != nil || err != nil {
		t.Fatalf("Existing of a missing directory = %v, %v; want nil, nil", sub, err)
	}
	c.Link(t, filepath.Join(top, "results"))
	if sub, err := d.Existing(ctx, "results"); sub != nil || err != nil {
		t.Fatalf("Existing of a link = %v, %v; want nil, nil", sub, err)
	}
	if _, err := os.Lstat(filepath.Join(top, "results")); !os.IsNotExist(err) {
		t.Errorf("the link is still there: %v", err)
	}
	rep.Reported(t, filepath.Join(top, "results"))
	c.Intact(t)
}

// A regular file where a directory belongs goes the same way.
func TestSubReplacesAFile(t *testing.T) {
	rep := &groupfstest.Reporter{}
	d, top := open(t, rep)
	os.WriteFile(filepath.Join(top, "input"), []byte("x"), 0o644)
	sub, err := d.Sub(ctx, "input", 0o700)
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	groupfstest.IsRealDir(t, filepath.Join(top, "input"))
	rep.Reported(t, filepath.Join(top, "input"))
}

// Create does not write through a link (not even a dangling one, which
// os.WriteFile would create at its target).
func TestCreateRefusesALinkedFile(t *testing.T) {
	c := groupfstest.NewCanary(t)
	rep := &groupfstest.Reporter{}
	d, top := open(t, rep)
	target := filepath.Join(c.Dir, "planted.md")
	c.Link(t, filepath.Join(top, "CLAUDE.md"), target)
	created, err := d.Create(ctx, "CLAUDE.md", []byte("notes"), 0o644)
	if err != nil || !created {
		t.Fatalf("Create = %v, %v; want a new file", created, err)
	}
	c.Intact(t)
	rep.Reported(t, filepath.Join(top, "CLAUDE.md"))
	if b, _ := os.ReadFile(filepath.Join(top, "CLAUDE.md")); string(b) != "notes" {
		t.Errorf("CLAUDE.md = %q", b)
	}
	// An existing file is kept.
	if created, err := d.Create(ctx, "CLAUDE.md", []byte("other"), 0o644); created || err != nil {
		t.Errorf("Create over a file = %v, %v; want it kept", created, err)
	}
}

func TestOpenFileRefusesALinkedFile(t *testing.T) {
	c := groupfstest.NewCanary(t)
	rep := &groupfstest.Reporter{}
	d, top := open(t, rep)
	c.Link(t, filepath.Join(top, "security.jsonl"), filepath.Join(c.Dir, "notes.txt"))
	f, err := d.OpenFile(ctx, "security.jsonl", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("line\n")
	f.Close()
	c.Intact(t)
	rep.Reported(t, filepath.Join(top, "security.jsonl"))
}

// RemoveFiles removes links themselves and leaves directories.
func TestRemoveFilesTakesLinksNotTargets(t *testing.T) {
	c := groupfstest.NewCanary(t)
	d, top := open(t, nil)
	os.Symlink(filepath.Join(c.Dir, "precious.db"), filepath.Join(top, "old.json"))
	os.Mkdir(filepath.Join(top, "keep"), 0o700)
	os.WriteFile(filepath.Join(top, "new.json"), nil, 0o600)
	cutoff := time.Now().Add(-time.Minute)
	n, err := d.RemoveFiles(func(fi fs.FileInfo) bool { return fi.ModTime().Before(cutoff) || fi.Mode()&fs.ModeSymlink != 0 })
	if err != nil || n != 1 {
		t.Fatalf("RemoveFiles = %d, %v; want the link only", n, err)
	}
	c.Intact(t)
	for _, keep := range []string{"keep", "new.json"} {
		if _, err := os.Lstat(filepath.Join(top, keep)); err != nil {
			t.Errorf("%s: %v", keep, err)
		}
	}
}

// MoveTo moves a link itself out, never what it points at.
func TestMoveToMovesTheLink(t *testing.T) {
	c := groupfstest.NewCanary(t)
	d, top := open(t, nil)
	os.Symlink(filepath.Join(c.Dir, "req.json"), filepath.Join(top, "x.json"))
	dest := filepath.Join(t.TempDir(), "quarantined")
	if err := d.MoveTo("x.json", dest); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(dest); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("quarantined object: %v, %v; want the link", fi, err)
	}
	c.Intact(t)
}

// The top directory is the owner's to place: a link there (a group's
// folder kept elsewhere) is followed, and what lies below it is checked.
func TestOpenFollowsTheOwnersTopLink(t *testing.T) {
	elsewhere := t.TempDir()
	top := filepath.Join(t.TempDir(), "family")
	if err := os.Symlink(elsewhere, top); err != nil {
		t.Fatal(err)
	}
	d, err := groupfs.Open(top, "family", 0o700, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Put("CLAUDE.md", []byte("notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(elsewhere, "CLAUDE.md")); err != nil {
		t.Errorf("the write did not land in the owner's folder: %v", err)
	}
}

func TestNamesStayInside(t *testing.T) {
	d, _ := open(t, nil)
	for _, name := range []string{"", ".", "..", "a/b", "/etc"} {
		if _, err := d.Sub(ctx, name, 0o700); err == nil {
			t.Errorf("Sub(%q) succeeded", name)
		}
	}
}
