package status_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/status"
)

func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "st")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestServeAndFetch(t *testing.T) {
	dir := shortDir(t)
	ln, err := status.Listen(status.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(status.SocketPath(dir)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- status.Serve(ctx, ln, func(context.Context) (status.Report, error) { return status.Report{PID: 42}, nil })
	}()
	rep, err := status.Fetch(context.Background(), dir)
	if err != nil || rep.PID != 42 {
		t.Fatalf("Fetch = %+v, %v", rep, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := status.Fetch(context.Background(), dir); !errors.Is(err, status.ErrNotRunning) {
		t.Fatalf("after the daemon stopped: %v", err)
	}
}

// A socket file left by a daemon killed with -9 answers nothing: no daemon
// runs, and the next daemon takes the path over.
func TestStaleSocket(t *testing.T) {
	dir := shortDir(t)
	ln, err := net.Listen("unix", status.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := status.Fetch(context.Background(), dir); !errors.Is(err, status.ErrNotRunning) {
		t.Fatalf("stale socket: %v", err)
	}
	ln, err = status.Listen(status.SocketPath(dir))
	if err != nil {
		t.Fatalf("take over a stale socket: %v", err)
	}
	ln.Close()
}

func TestServeReportsFailure(t *testing.T) {
	dir := shortDir(t)
	ln, err := status.Listen(status.SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go status.Serve(ctx, ln, func(context.Context) (status.Report, error) { return status.Report{}, errors.New("database is locked") })
	if _, err := status.Fetch(ctx, dir); err == nil || errors.Is(err, status.ErrNotRunning) || !strings.Contains(err.Error(), "database is locked") {
		t.Fatalf("err = %v", err)
	}
}
