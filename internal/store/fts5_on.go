//go:build sqlite_fts5

package store

// withFTS5 says go-sqlite3 was built with FTS5, which the search index of
// messages needs (migration 0016).
const withFTS5 = true
