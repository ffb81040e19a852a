package gateway

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The fallback directory under /tmp is a name anyone can take first: a
// link, a directory others may write, or (when the daemon runs as root) a
// directory of another user's is not used.
func TestTempDirRefusesWhatOthersMade(t *testing.T) {
	uid := os.Getuid()
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, path string)
		keep  bool
	}{
		{"missing", func(*testing.T, string) {}, true},
		{"own private dir", func(t *testing.T, p string) { os.Mkdir(p, 0o700) }, true},
		{"world-writable dir", func(t *testing.T, p string) { os.Mkdir(p, 0o777); os.Chmod(p, 0o777) }, false},
		{"symlink to a dir", func(t *testing.T, p string) { os.Symlink(t.TempDir(), p) }, false},
		{"another user's dir", func(t *testing.T, p string) {
			if uid != 0 {
				t.Skip("needs root to make a directory of another user's")
			}
			os.Mkdir(p, 0o700)
			os.Chown(p, 12345, 12345)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			fixed := filepath.Join(tmp, "nanoclawd-"+strconv.Itoa(uid))
			tc.plant(t, fixed)
			got, err := tempDir(tmp, uid)
			if err != nil {
				t.Fatal(err)
			}
			if tc.keep != (got == fixed) {
				t.Fatalf("tempDir = %s; want the fixed name: %v", got, tc.keep)
			}
			if !tc.keep && !strings.HasPrefix(filepath.Base(got), "nanoclawd-gw-") {
				t.Errorf("fallback %s is not a new private directory", got)
			}
			if !ours(got, uid) {
				t.Errorf("the directory used, %s, is not the daemon's own and private", got)
			}
		})
	}
}

// A socket nobody listens on (its daemon was killed) is swept; a live
// one, a regular file and a name not a gateway's are left alone.
func TestSweepSocketsRemovesOnlyDeadOnes(t *testing.T) {
	dir := t.TempDir()
	live, err := Listen(filepath.Join(dir, "live.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	dead, err := net.Listen("unix", filepath.Join(dir, "dead.sock"))
	if err != nil {
		t.Fatal(err)
	}
	dead.(*net.UnixListener).SetUnlinkOnClose(false) // as a kill -9 leaves it
	dead.Close()
	os.WriteFile(filepath.Join(dir, "file.sock"), nil, 0o600)
	other, err := net.Listen("unix", filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	other.(*net.UnixListener).SetUnlinkOnClose(false)
	other.Close()

	if n := SweepSockets(dir); n != 1 {
		t.Errorf("removed %d, want the dead socket alone", n)
	}
	for name, want := range map[string]bool{"live.sock": true, "dead.sock": false, "file.sock": true, "other": true} {
		if _, err := os.Lstat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s: there %t, want %t", name, err == nil, want)
		}
	}
	if n := SweepSockets(filepath.Join(dir, "missing")); n != 0 {
		t.Errorf("a missing directory: %d removed", n)
	}
}
