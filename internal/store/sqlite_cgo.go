//go:build cgo

package store

import (
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/mattn/go-sqlite3"
)

// go-sqlite3's error codes and connection type exist only in a cgo build;
// they are named here alone so that the rest of the package also
// type-checks without cgo (the darwin vet of make check cross-compiles
// with CGO_ENABLED=0, see docs/testing.md).

// sqliteBusy tells whether err is SQLite's SQLITE_BUSY or SQLITE_LOCKED.
func sqliteBusy(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked)
}

// sqliteError tells whether err is SQLite's SQLITE_ERROR.
func sqliteError(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrError
}

// sqliteFull tells whether err is SQLite's SQLITE_FULL.
func sqliteFull(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrFull
}

// checkpointDriver opens the daemon's connections: SQLite's automatic
// checkpoint off, the WAL trimmed past walLimit, and every commit
// signalled to c.
func checkpointDriver(c *Checkpointer) driver.Driver {
	return &sqlite3.SQLiteDriver{ConnectHook: func(conn *sqlite3.SQLiteConn) error {
		if _, err := conn.Exec("PRAGMA wal_autocheckpoint = 0", nil); err != nil {
			return err
		}
		if _, err := conn.Exec(fmt.Sprintf("PRAGMA journal_size_limit = %d", walLimit), nil); err != nil {
			return err
		}
		conn.RegisterCommitHook(func() int {
			select {
			case c.commits <- struct{}{}:
			default:
			}
			return 0 // go on with the commit
		})
		return nil
	}}
}
