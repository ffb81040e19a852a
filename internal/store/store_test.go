package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/nanoclawd/nanoclawd/migrations"
)

func TestMigrateOnceAndRefuseNewer(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var v int
	db.QueryRowContext(context.Background(), "PRAGMA user_version").Scan(&v)
	if v == 0 {
		t.Fatal("no migration applied")
	}
	var fk int
	db.QueryRowContext(context.Background(), "PRAGMA foreign_keys").Scan(&fk)
	if fk != 1 {
		t.Error("foreign keys off")
	}
	db.Close()

	// Reopening applies nothing twice.
	if db, err = Open(dir); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	// A database written by a newer binary is refused, untouched.
	if _, err := db.ExecContext(context.Background(), "PRAGMA user_version = 999"); err != nil {
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
	db, err := sql.Open("sqlite3", DSN(filepath.Join(t.TempDir(), "x.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bad := fstest.MapFS{
		"0001_a.sql": {Data: []byte("CREATE TABLE a (x);")},
		"0002_b.sql": {Data: []byte("CREATE TABLE oops (")},
	}
	err = Migrate(db, bad)
	if err == nil || !strings.Contains(err.Error(), "migration 0002_b") {
		t.Fatalf("broken migration: %v", err)
	}
	var n, v int
	db.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'a'").Scan(&n)
	db.QueryRow("PRAGMA user_version").Scan(&v)
	if n != 0 || v != 0 {
		t.Errorf("half a migration run was kept (table a: %d, version %d)", n, v)
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
	db.ExecContext(context.Background(), "CREATE TABLE n (v INTEGER)")
	db.ExecContext(context.Background(), "INSERT INTO n VALUES (0)")
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx, err := db.Begin(context.Background())
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
	db.QueryRowContext(context.Background(), "SELECT v FROM n").Scan(&v)
	if v != 100 {
		t.Errorf("lost updates: %d", v)
	}
}

// The shipped migrations are numbered 1..N without a gap or a repeat.
func TestShippedMigrationsAreContiguous(t *testing.T) {
	files, err := numbered(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range files {
		if want := fmt.Sprintf("%04d_", i+1); !strings.HasPrefix(name, want) {
			t.Errorf("file %d is %s, want a name starting %s", i+1, name, want)
		}
	}
}

// A gap, a repeat or a name without a number is refused before anything
// runs: applied by position, a file added into a gap would have run a
// later one a second time.
func TestMigrationNumbersRefused(t *testing.T) {
	sql := &fstest.MapFile{Data: []byte("SELECT 1;")}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"0001_a.sql": sql, "0003_c.sql": sql},
		"repeat":    {"0001_a.sql": sql, "0001_b.sql": sql},
		"no number": {"0001_a.sql": sql, "init.sql": sql},
	} {
		db, err := OpenFile(filepath.Join(t.TempDir(), "x.db"))
		if err != nil {
			t.Fatal(err)
		}
		err = Migrate(db.db, fsys)
		db.Close()
		if err == nil {
			t.Errorf("%s: migrated", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}
}

// A database migrated by the numbers of an older binary (the first k files)
// is brought up to date by applying exactly the rest.
func TestOldDatabaseUpgrades(t *testing.T) {
	files, err := numbered(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k < len(files); k++ {
		old := fstest.MapFS{}
		for _, name := range files[:k] {
			data, _ := fs.ReadFile(migrations.FS, name)
			old[name] = &fstest.MapFile{Data: data}
		}
		db, err := sql.Open("sqlite3", DSN(filepath.Join(t.TempDir(), "old.db")))
		if err != nil {
			t.Fatal(err)
		}
		if err := Migrate(db, old); err != nil {
			t.Fatalf("first %d: %v", k, err)
		}
		if err := Migrate(db, migrations.FS); err != nil {
			t.Fatalf("upgrade from %d: %v", k, err)
		}
		var v int
		db.QueryRow("PRAGMA user_version").Scan(&v)
		db.Close()
		if v != len(files) {
			t.Errorf("upgrade from %d: version %d, want %d", k, v, len(files))
		}
	}
}
