package fswatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no change seen after %s", what)
	}
}

func TestFileSeesEveryKindOfReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.jsonc")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := File(ctx, path, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	wait(t, ch, "create")
	tmp := filepath.Join(dir, "f.tmp")
	os.WriteFile(tmp, []byte("2"), 0o600)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	wait(t, ch, "rename over")
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("3")
	f.Close()
	wait(t, ch, "write in place")
	os.Remove(path)
	wait(t, ch, "remove")

	cancel()
	for range ch { // closes when ctx ends
	}
}

func TestFileNeedsItsDirectory(t *testing.T) {
	_, err := File(context.Background(), filepath.Join(t.TempDir(), "no", "such", "f"), 0)
	if err == nil {
		t.Fatal("watching a file in a missing directory succeeded")
	}
}
