package confine

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/sandbox"
)

// A run takes the socket bound while the one before it started; one made
// for another user is not handed out; Close leaves no socket behind.
func TestSocketsMadeAhead(t *testing.T) {
	dir := t.TempDir()
	me := sandbox.User{UID: os.Geteuid(), GID: os.Getegid()}
	var s Sockets
	take := func() string {
		t.Helper()
		path, ln, err := s.take(dir, me)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return path
	}
	first := take()
	s.making.Wait()
	ahead := s.spare.path
	if ahead == first {
		t.Fatal("no other socket made ahead after the first run's")
	}
	second := take()
	if second != ahead {
		t.Errorf("the second run got %s, not the socket made ahead %s", second, ahead)
	}
	// A live socket of the gateway's mode, which a client reaches.
	if fi, err := os.Stat(second); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v, %v", second, fi, err)
	}
	conn, err := net.Dial("unix", second)
	if err != nil {
		t.Fatalf("the socket made ahead does not answer: %v", err)
	}
	conn.Close()
	// One made for another user (agent.runAs changed since) is not used.
	s.making.Wait()
	s.spare.user.GID++
	stale := s.spare.path
	if third := take(); third == stale {
		t.Error("a socket made for another user was handed out")
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale socket %s is still there: %v", stale, err)
	}
	s.Close()
	if s.spare != nil {
		t.Error("a socket made ahead outlived Close")
	}
}

// Every socket given out and closed, and the one made ahead closed,
// nothing is left; the CLI's nil Sockets makes none ahead.
func TestSocketsLeaveNothing(t *testing.T) {
	me := sandbox.User{UID: os.Geteuid(), GID: os.Getegid()}
	for _, s := range []*Sockets{{}, nil} {
		dir := t.TempDir()
		for range 3 {
			_, ln, err := s.take(dir, me)
			if err != nil {
				t.Fatal(err)
			}
			ln.Close()
		}
		s.Close()
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
			t.Errorf("left behind (made ahead: %t): %v", s != nil, left)
		}
	}
}
