// Package store opens nanoclawd's SQLite database and brings its schema up
// to date from the embedded migrations.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"

	"github.com/nanoclawd/nanoclawd/migrations"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// Errors of opening the database.
var (
	// ErrTooNew means the database was written by a newer nanoclawd.
	ErrTooNew = errors.New("database schema is newer than this binary")
	// ErrNoFTS5 means this binary's SQLite lacks full-text search.
	ErrNoFTS5 = errors.New("no such module: fts5 — this nanoclawd was built without SQLite full-text search; build it with -tags sqlite_fts5 (make build and make test do)")
)

// DSN returns the connection string for the SQLite file at path. Every
// pragma is in the DSN so that each pooled connection gets it, and
// _txlock=immediate makes read-then-write transactions take the write lock
// up front instead of failing with "database is locked". The statement
// cache keeps SQLite from parsing the same few queries again for every IPC
// file and message: parsing was a sixth of the daemon's CPU in a burst.
func DSN(path string) string {
	return "file:" + path + "?_journal_mode=WAL&_busy_timeout=5000&_foreign_keys=on&_synchronous=NORMAL&_txlock=immediate&_stmt_cache_size=64"
}

// Busy reports whether err is SQLite refusing because another connection
// or process holds the database locked past the busy timeout. With
// _txlock=immediate that happens at BEGIN, before anything is written, so
// the same transaction may simply be tried again.
func Busy(err error) bool {
	return sqliteBusy(err)
}

// BadQuery reports whether err is SQLite refusing a statement for what it
// says (SQLITE_ERROR: a syntax error, such as a full-text query the FTS5
// index cannot read), not for the database's state: trying it again gives
// the same answer.
func BadQuery(err error) bool {
	return sqliteError(err)
}

// Open opens (creating if needed) the database in dataDir and applies any
// migrations it has not seen yet.
func Open(dataDir string) (*DB, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	return OpenFile(layout.New(dataDir, "").DB())
}

// OpenFile opens the database at path and migrates it.
func OpenFile(path string) (*DB, error) {
	db, err := sql.Open("sqlite3", DSN(path))
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := migrate(db, path); err != nil {
		return nil, err
	}
	return Wrap(db), nil
}

// migrate brings db up to date, closing it if that fails.
func migrate(db *sql.DB, path string) error {
	err := ErrNoFTS5
	if withFTS5 {
		if err = incrementalVacuum(db); err == nil {
			err = Migrate(db, migrations.FS)
		}
	}
	if err != nil {
		db.Close()
		if strings.Contains(err.Error(), "no such module: fts5") {
			err = ErrNoFTS5
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// incrementalVacuum sets auto_vacuum to INCREMENTAL, so that pruning can
// give the freed pages back to the file system (PRAGMA incremental_vacuum)
// instead of keeping them in the file for ever. A new database takes it at
// once; one made before needs a single VACUUM, which rewrites the file
// (about a second per 100 MiB, once).
func incrementalVacuum(db *sql.DB) error {
	var mode int
	if err := db.QueryRow("PRAGMA auto_vacuum").Scan(&mode); err != nil {
		return fmt.Errorf("read auto_vacuum: %w", err)
	}
	if mode == 2 {
		return nil
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		return err
	}
	defer conn.Close()
	// The same connection for both: a PRAGMA reaches only the pooled
	// connection it runs on.
	if _, err := conn.ExecContext(context.Background(), "PRAGMA auto_vacuum = INCREMENTAL"); err != nil {
		return fmt.Errorf("set auto_vacuum: %w", err)
	}
	if _, err := conn.ExecContext(context.Background(), "VACUUM"); err != nil {
		return fmt.Errorf("convert the database to incremental vacuum (VACUUM; it needs free disk space as large as the database): %w", err)
	}
	return nil
}

// Migrate applies, in one transaction, every NNNN_name.sql file of fsys
// whose number is above PRAGMA user_version, in number order, and records
// the highest number applied. Numbers must run 1, 2, 3, … without a gap or
// a repeat, so a file added later can never be taken for one already run.
func Migrate(db *sql.DB, fsys fs.FS) error {
	files, err := numbered(fsys)
	if err != nil {
		return err
	}
	// Up to date, as at every start but the first after an upgrade: a
	// read says so without the write transaction (the daemon's start
	// opens the database twice).
	var current int
	if err := db.QueryRow("PRAGMA user_version").Scan(&current); err == nil && current == len(files) {
		return nil
	}
	tx, err := db.Begin()
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRow("PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if version > len(files) {
		return fmt.Errorf("%w (schema %d, this binary knows %d): upgrade nanoclawd or point dataDir at another directory", ErrTooNew, version, len(files))
	}
	for _, name := range files[version:] {
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(string(body)); err != nil {
			return fmt.Errorf("migration %s: %w", strings.TrimSuffix(name, ".sql"), err)
		}
	}
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(files))); err != nil {
		return fmt.Errorf("write schema version: %w", err)
	}
	return tx.Commit()
}

// numbered lists fsys's *.sql files so that file number n is at index n-1,
// refusing a name without a number, a gap and a repeat.
func numbered(fsys fs.FS) ([]string, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	files := make([]string, len(names))
	for _, name := range names {
		digits, _, _ := strings.Cut(name, "_")
		n, err := strconv.Atoi(digits)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("migration %s: the name must start with its number, as in 0001_name.sql", name)
		}
		if n > len(names) {
			return nil, fmt.Errorf("migration %s: numbers must run from 1 without a gap, and there are %d files", name, len(names))
		}
		if files[n-1] != "" {
			return nil, fmt.Errorf("migration %s: number %d is taken by %s; give one of them the next free number", name, n, files[n-1])
		}
		files[n-1] = name
	}
	return files, nil
}
