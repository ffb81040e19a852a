package store

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// A hook runs once after its transaction commits, and never after a
// rollback; a Rollback deferred past the Commit changes nothing.
func TestOnCommitRunsOnceAfterCommitOnly(t *testing.T) {
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var ran []string

	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.OnCommit(func() { ran = append(ran, "rolled back") })
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}

	tx, err = db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx.OnCommit(func() { ran = append(ran, "committed") })
	if len(ran) != 0 {
		t.Fatalf("hooks ran before the commit: %q", ran)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
		t.Errorf("Rollback after Commit: %v, want sql.ErrTxDone", err)
	}
	if err := tx.Commit(); !errors.Is(err, sql.ErrTxDone) {
		t.Errorf("second Commit: %v, want sql.ErrTxDone", err)
	}
	if len(ran) != 1 || ran[0] != "committed" {
		t.Errorf("hooks ran: %q, want only the committed one, once", ran)
	}
}

// locked returns a DB whose connections give up on a lock at once (as the
// daemon's do after their busy timeout), and a transaction of another
// connection pool, playing another process, that holds the write lock.
func locked(t *testing.T) (*DB, *sql.Tx) {
	t.Helper()
	dir := t.TempDir()
	other, err := Open(dir) // migrates
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	short, err := sql.Open("sqlite3", "file:"+layout.New(dir, "").DB()+"?_busy_timeout=1&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { short.Close() })
	lock, err := other.db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Rollback() })
	if _, err := short.Begin(); !Busy(err) {
		t.Fatalf("the lock does not hold: %v", err)
	}
	return Wrap(short), lock
}

// Begin waits for a lock another connection holds and then succeeds.
func TestBeginWaitsOutALock(t *testing.T) {
	db, lock := locked(t)
	begun := make(chan error, 1)
	go func() {
		tx, err := db.Begin(context.Background())
		if err == nil {
			_, err = tx.Exec(`INSERT INTO cursors (chat_jid, answered_seq) VALUES ('after the lock', 1)`)
			if err == nil {
				err = tx.Commit()
			}
		}
		begun <- err
	}()
	// Still locked: a plain BEGIN on these terms fails, so Begin cannot
	// have got through yet.
	if _, err := db.db.Begin(); !Busy(err) {
		t.Fatalf("the lock does not hold: %v", err)
	}
	select {
	case err := <-begun:
		t.Fatalf("Begin returned (%v) while the database was locked", err)
	default:
	}
	if err := lock.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-begun; err != nil {
		t.Fatalf("Begin after the lock went: %v", err)
	}
}

// Cancelling ctx ends Begin's wait for a lock.
func TestBeginStopsWithItsContext(t *testing.T) {
	db, _ := locked(t)
	ctx, cancel := context.WithCancel(context.Background())
	begun := make(chan error, 1)
	go func() {
		_, err := db.Begin(ctx)
		begun <- err
	}()
	cancel()
	// Were ctx not heeded, Begin would give up only after busyWait, with
	// the lock's error.
	if err := <-begun; !errors.Is(err, context.Canceled) {
		t.Errorf("Begin after its context ended: %v, want context.Canceled", err)
	}
}
