//go:build cgo

// The test needs a real database, which go-sqlite3 has only with cgo.

package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mattn/go-sqlite3"
)

// A transaction that finds the disk full gives up the reserve, says so
// once, and is tried again; the reserve comes back with Hold.
func TestDoGivesUpTheReserveWhenFull(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := &Reserve{Path: filepath.Join(dir, "disk.reserve"), Size: 1 << 20}
	if ok, err := r.Hold(); !ok || err != nil {
		t.Fatalf("hold: %v %v", ok, err)
	}
	if fi, err := os.Stat(r.Path); err != nil || fi.Size() != r.Size {
		t.Fatalf("the reserve is not there: %v", err)
	}
	told := 0
	db.KeepReserve(r, func() { told++ })
	if _, err := db.ExecContext(context.Background(), `CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	tries := 0
	err = db.Do(context.Background(), func(tx *Tx) error {
		tries++
		if _, err := tx.Exec(`INSERT INTO t VALUES (?)`, tries); err != nil {
			return err
		}
		if tries == 1 {
			return sqlite3.Error{Code: sqlite3.ErrFull}
		}
		return nil
	})
	if err != nil || tries != 2 || told != 1 {
		t.Fatalf("Do: %v after %d tries, told %d times; want nil after 2, told once", err, tries, told)
	}
	var rows int
	db.QueryRowContext(context.Background(), `SELECT count(*) FROM t`).Scan(&rows)
	if rows != 1 {
		t.Errorf("%d rows: the failed try must leave nothing", rows)
	}
	if _, err := os.Stat(r.Path); !errors.Is(err, os.ErrNotExist) || r.Held() {
		t.Errorf("the reserve was not given up: %v", err)
	}
	// Full again with nothing left to give up: the error comes back.
	err = db.Do(context.Background(), func(*Tx) error { return sqlite3.Error{Code: sqlite3.ErrFull} })
	if !Full(err) || told != 1 {
		t.Errorf("with no reserve left: %v, told %d times", err, told)
	}
	if ok, err := r.Hold(); !ok || err != nil {
		t.Fatalf("hold again: %v %v", ok, err)
	}
}
