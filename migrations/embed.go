// Package migrations holds the numbered SQL files that build nanoclawd's
// SQLite schema. Files are applied in name order, each once, and the count
// applied is kept in PRAGMA user_version.
package migrations

import "embed"

// FS holds every NNNN_name.sql file of this directory.
//
//go:embed *.sql
var FS embed.FS
