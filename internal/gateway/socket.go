package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// maxSocketPath keeps a socket path under the ~104–108 bytes a Unix socket
// address holds on Linux and macOS.
const maxSocketPath = 100

// SocketPath is a fresh socket path for a run's gateway: in dir (the
// layout's gateways directory), or, when that path would be too long for
// a Unix socket, in a directory of the daemon's own under the system's
// temporary directory.
func SocketPath(dir string) (string, error) {
	b := make([]byte, 6)
	rand.Read(b)
	name := hex.EncodeToString(b) + ".sock"
	if len(filepath.Join(dir, name)) > maxSocketPath {
		var err error
		if dir, err = tempDir(os.TempDir(), os.Getuid()); err != nil {
			return "", err
		}
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("gateway directory %s: %w", dir, err)
	}
	return filepath.Join(dir, name), nil
}

// tempDir is the daemon's directory for gateway sockets under tmp:
// nanoclawd-<uid>, made 0700. Anyone may create that name in /tmp first —
// a link, or a directory of another user's in which they could swap the
// socket for their own — so one that is not a directory of uid's that only
// uid can write is not used: a new private directory with a random name
// takes its place.
func tempDir(tmp string, uid int) (string, error) {
	dir := filepath.Join(tmp, fmt.Sprintf("nanoclawd-%d", uid))
	err := os.Mkdir(dir, 0o700)
	if err == nil || (errors.Is(err, fs.ErrExist) && ours(dir, uid)) {
		return dir, nil
	}
	private, terr := os.MkdirTemp(tmp, "nanoclawd-gw-")
	if terr != nil {
		return "", fmt.Errorf("gateway directory: %s is not usable (%v) and no private one can be made: %w", dir, err, terr)
	}
	return private, nil
}

// ours tells whether dir is a real directory owned by uid that no one else
// may write.
func ours(dir string, uid int) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// SweepSockets removes the gateway sockets in dir that nobody listens on
// any more: a daemon killed with -9 leaves its runs' sockets, and the one
// it had made ahead for its next run, behind. A live one (a `security
// test` running beside the daemon) answers and is kept. It returns how
// many it removed.
func SweepSockets(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if e.Type()&fs.ModeSocket == 0 || filepath.Ext(e.Name()) != ".sock" {
			continue
		}
		path := filepath.Join(dir, e.Name())
		conn, err := net.Dial("unix", path)
		if err == nil {
			conn.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) && os.Remove(path) == nil {
			n++
		}
	}
	return n
}
