//go:build !cgo

package store

import (
	"database/sql/driver"

	"github.com/mattn/go-sqlite3"
)

// Without cgo go-sqlite3 is a stand-in whose every Open fails with its own
// message ("go-sqlite3 requires cgo"): such a build only type-checks (the
// darwin vet of make check), it never opens a database, so no SQLite
// error code can reach these.

func sqliteBusy(error) bool { return false }

func sqliteFull(error) bool { return false }

func sqliteError(error) bool { return false }

func checkpointDriver(*Checkpointer) driver.Driver { return &sqlite3.SQLiteDriver{} }
