// Package migrations holds the numbered SQL files that build nanoclawd's
// SQLite schema. Each file starts with its number (0001, 0002, … without
// a gap); files are applied in number order, each once, and the highest
// number applied is kept in PRAGMA user_version.
package migrations

import "embed"

// FS holds every NNNN_name.sql file of this directory.
//
//go:embed *.sql
var FS embed.FS
