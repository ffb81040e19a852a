package store

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"testing/fstest"
)

func TestMigrateOnceAndRefuseNewer(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var v int
	db.QueryRow("PRAGMA user_version").Scan(&v)
	if v == 0 {
		t.Fatal("no migration applied")
	}
	var fk int
	db.QueryRow("PRAGMA foreign_keys").Scan(&fk)
	if fk != 1 {
		t.Error("foreign keys off")
	}
	db.Close()

	// Reopening applies nothing twice.
	if db, err = Open(dir); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	// A database written by a newer binary is refused, untouched.
	if _, err := db.Exec("PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(dir)
	if !errors.Is(err, ErrTooNew) {
		t.Fatalf("want ErrTooNew, got %v", err)
	}
	t.Log(err)
}

func TestFailedMigrationRollsBack(t *testing.T) {
	db, err := OpenFile(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bad := fstest.MapFS{
		"9001_a.sql": {Data: []byte("CREATE TABLE a (x);")},
		"9002_b.sql": {Data: []byte("CREATE TABLE oops (")},
	}
	before := 0
	db.QueryRow("PRAGMA user_version").Scan(&before)
	if err := Migrate(db, bad); err == nil {
		t.Fatal("broken migration applied")
	}
	var n int
	db.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'a'").Scan(&n)
	if n != 0 {
		t.Error("half a migration run was kept")
	}
}

// With _txlock=immediate, concurrent read-then-write transactions wait for
// each other instead of failing with "database is locked".
func TestConcurrentWriters(t *testing.T) {
	db, err := OpenFile(filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Exec("CREATE TABLE n (v INTEGER)")
	db.Exec("INSERT INTO n VALUES (0)")
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx, err := db.Begin()
			if err != nil {
				errs <- err
				return
			}
			var v int
			tx.QueryRow("SELECT v FROM n").Scan(&v)
			tx.Exec("UPDATE n SET v = ?", v+1)
			errs <- tx.Commit()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var v int
	db.QueryRow("SELECT v FROM n").Scan(&v)
	if v != 100 {
		t.Errorf("lost updates: %d", v)
	}
}
