package store

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/nanoclawd/nanoclawd/migrations"
)

// A database made before auto_vacuum was set (mode NONE, in WAL, with
// rows) is converted to INCREMENTAL when it is opened, and keeps its rows;
// a new one is INCREMENTAL from the start.
func TestOpenConvertsToIncrementalVacuum(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	raw, err := sql.Open("sqlite3", DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := numbered(migrations.FS)
	old := fstest.MapFS{}
	for _, name := range files {
		if strings.HasSuffix(name, "_search.sql") { // the database is from before the index
			break
		}
		data, _ := fs.ReadFile(migrations.FS, name)
		old[name] = &fstest.MapFile{Data: data}
	}
	if err := Migrate(raw, old); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO messages (chat_jid, id, text, time) VALUES ('c', 'm1', 'the plumber was Jonas', 1)`); err != nil {
		t.Fatal(err)
	}
	var mode int
	raw.QueryRow("PRAGMA auto_vacuum").Scan(&mode)
	raw.Close()
	if mode != 0 {
		t.Fatalf("the old database has auto_vacuum %d, want 0 to start with", mode)
	}

	db, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.QueryRowContext(context.Background(), "PRAGMA auto_vacuum").Scan(&mode)
	if mode != 2 {
		t.Errorf("after OpenFile auto_vacuum = %d, want 2 (incremental)", mode)
	}
	// The search migration indexed the message it found.
	var id string
	if err := db.QueryRowContext(context.Background(), `SELECT m.id FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid WHERE messages_fts MATCH 'plumber'`).Scan(&id); err != nil || id != "m1" {
		t.Errorf("the existing message in the index: %q, %v", id, err)
	}

	fresh, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	fresh.QueryRowContext(context.Background(), "PRAGMA auto_vacuum").Scan(&mode)
	if mode != 2 {
		t.Errorf("a new database has auto_vacuum %d, want 2", mode)
	}
}
