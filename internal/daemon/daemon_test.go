package daemon_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/daemon"
)

// The single-instance lock, as restore takes it through daemon.Lock: a
// second taker on the same dataDir is refused at once with ErrLocked naming
// the holder's PID, and closing the first lock's file frees it.
func TestLockIsHeldUntilClosed(t *testing.T) {
	dir := t.TempDir()
	first, err := daemon.Lock(dir)
	if err != nil {
		t.Fatalf("first lock of a fresh dataDir: %v", err)
	}
	_, err = daemon.Lock(dir)
	if !errors.Is(err, daemon.ErrLocked) || !strings.Contains(err.Error(), "PID "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock while the first is held: got %v, want ErrLocked naming PID %d", err, os.Getpid())
	}
	first.Close()
	again, err := daemon.Lock(dir)
	if err != nil {
		t.Fatalf("lock after the first was closed: %v", err)
	}
	again.Close()
}
