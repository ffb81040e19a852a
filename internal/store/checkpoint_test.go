package store

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// With the daemon's connections no commit checkpoints the WAL (it grows
// past SQLite's 1000-page threshold), and the Checkpointer moves it into
// the database after the commits.
func TestCheckpointerTakesOverFromCommits(t *testing.T) {
	dir := t.TempDir()
	db, c, err := OpenWithCheckpointer(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), `CREATE TABLE blobs (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	for range 300 { // ~1,200 pages of WAL, each commit its own
		if _, err := db.ExecContext(context.Background(), `INSERT INTO blobs VALUES (zeroblob(16000))`); err != nil {
			t.Fatal(err)
		}
	}
	path := layout.New(dir, "").DB()
	// The rows are in the WAL only: no commit copied them into the file.
	if pages := size(t, path+"-wal") / 4096; pages < 1000 {
		t.Fatalf("the WAL holds %d pages after 300 commits: a commit checkpointed it", pages)
	}
	if n := size(t, path); n > 1<<20 {
		t.Fatalf("the database file has %d bytes before any checkpoint", n)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	if _, err := db.ExecContext(ctx, `INSERT INTO blobs VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	// Checkpointed, the ~4.8 MB of rows are in the database file.
	for deadline := time.Now().Add(30 * time.Second); size(t, path) < 4<<20; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint: the database file has %d bytes", size(t, path))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A burst while a reader keeps the checkpoint from finishing grows the
// WAL past walLimit; once the reader is gone the next commit brings it
// back under the limit (TRUNCATE), instead of leaving its high-water size.
func TestCheckpointerBoundsTheWAL(t *testing.T) {
	dir := t.TempDir()
	db, c, err := OpenWithCheckpointer(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if _, err := db.ExecContext(ctx, `CREATE TABLE blobs (b BLOB)`); err != nil {
		t.Fatal(err)
	}
	reader, err := db.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A read transaction pins the WAL as it is (DEFERRED: _txlock would
	// make a plain BEGIN take the write lock).
	if _, err := reader.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM blobs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	for range 1500 { // ~24 MB
		if _, err := db.ExecContext(ctx, `INSERT INTO blobs VALUES (zeroblob(16000))`); err != nil {
			t.Fatal(err)
		}
	}
	path := layout.New(dir, "").DB() + "-wal"
	if s := size(t, path); s <= walLimit {
		t.Fatalf("the WAL is %d bytes with a reader pinning it; the test needs it past %d", s, walLimit)
	}
	reader.ExecContext(ctx, `COMMIT`)
	reader.Close()
	if _, err := db.ExecContext(ctx, `INSERT INTO blobs VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); size(t, path) > walLimit; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the WAL stays at %d bytes, past the limit of %d", size(t, path), walLimit)
		}
	}
}
