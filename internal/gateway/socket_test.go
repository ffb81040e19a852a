package gateway

import (
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
