package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteReplacesWithMode(t *testing.T) {
	old := syscall.Umask(0o077) // the mode given wins over the umask
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "status.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("content %q, want new", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

func TestWriteReplacesSymlinkInsteadOfFollowing(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "secret")
	os.WriteFile(target, []byte("keep"), 0o600)
	path := filepath.Join(dir, "answer.json")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the write went through the symlink: %q", b)
	}
	if fi, _ := os.Lstat(path); !fi.Mode().IsRegular() {
		t.Errorf("%s is still a symlink", path)
	}
}

func TestWriteInStaysInsideRoot(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "results")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := WriteIn(root, filepath.Join("results", "a.json"), []byte("x"), 0o600); err == nil {
		t.Error("wrote through a symlink that leaves the root")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("files outside the root: %v", entries)
	}
}

func TestWriteFailsCleanly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "f")
	if err := Write(path, []byte("x"), 0o600); err == nil {
		t.Error("wrote into a directory that does not exist")
	}
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "d"), 0o700) // renaming a file over a directory fails
	if err := Write(filepath.Join(dir, "d"), []byte("x"), 0o600); err == nil {
		t.Error("replaced a directory")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temp file left behind: %v", entries)
	}
}

// Put keeps every property of Write but the sync: the content and mode
// replace the old file at once, a symlink is replaced, not followed, and
// PutIn stays inside its root.
func TestPutIsWriteWithoutTheSync(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	path := filepath.Join(dir, "verdict.json")
	os.WriteFile(path, []byte("old"), 0o600)
	if err := Put(path, []byte("new"), 0o640); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("content %q, want new", b)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	target := filepath.Join(outside, "secret")
	os.WriteFile(target, []byte("keep"), 0o600)
	link := filepath.Join(dir, "link.json")
	os.Symlink(target, link)
	if err := Put(link, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("Put wrote through a symlink: %q", b)
	}
	os.Symlink(outside, filepath.Join(dir, "out"))
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := PutIn(root, filepath.Join("out", "planted"), []byte("x"), 0o600); err == nil {
		t.Error("PutIn wrote through a symlink out of its root")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a file appeared outside the root")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 { // verdict.json, link.json, out: no temp file
		t.Errorf("left behind: %v", entries)
	}
}
