//go:build !sqlite_fts5

package store

// withFTS5 is false in a build without the sqlite_fts5 tag: go-sqlite3's
// SQLite then has no FTS5, and the database refuses to open (ErrNoFTS5)
// rather than failing later at the first message stored.
const withFTS5 = false
