package ipc

import (
	"database/sql"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/migrations"
)

// A database whose daemon was killed between recording IPC files and
// acting on them (ipc_files, done_keys) is upgraded to the journal
// without losing or doubling what was owed.
func TestUpgradeToJournal(t *testing.T) {
	db, err := sql.Open("sqlite3", store.DSN(filepath.Join(t.TempDir(), "nanoclaw.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := fstest.MapFS{}
	err = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path >= "0010" { // the migrations before the journal
			return err
		}
		data, err := fs.ReadFile(migrations.FS, path)
		old[path] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(db, old); err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	row := `INSERT INTO ipc_files (id, folder, sub, name, hash, state, request, violation, decided_at) VALUES (?, 'family', ?, ?, 'h', ?, ?, ?, 1000)`
	exec(row, 1, "messages", "a.json", "accepted", `{"type":"message","chatJid":"family@g.us","text":"owed"}`, nil)
	exec(row, 2, "messages", "b.json", "accepted", `{"type":"message","chatJid":"family@g.us","text":"sent before the kill"}`, nil)
	exec(`INSERT INTO done_keys (key, done_at) VALUES ('ipc-2-1000', 1)`)
	exec(row, 3, "messages", "c.json", "refused", nil, `{"group":"family","target":"ipc/family","detail":"wrong or expired token (file ipc/family/messages/c.json)"}`)
	exec(row, 4, "tasks", "d.json", "accepted", `{"type":"register_group","jid":"x@g.us","name":"X","folder":"x"}`, nil)
	exec(row, 5, "messages", "e.json", "done", `{"type":"message","chatJid":"family@g.us","text":"long done"}`, nil)

	if err := store.Migrate(db, migrations.FS); err != nil {
		t.Fatal(err)
	}
	var texts []string
	rows, err := db.Query(`SELECT text FROM outbox`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		texts = append(texts, s)
	}
	rows.Close()
	if len(texts) != 1 || texts[0] != "owed" {
		t.Errorf("outbox %q, want only the owed message", texts)
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM violations WHERE grp = 'family' AND detail LIKE 'wrong or expired token%'`).Scan(&n)
	if n != 1 {
		t.Errorf("%d audit rows for the refused file, want 1", n)
	}
	want := map[int64]string{1: "sent 0", 2: "sent 0", 3: "refused 0", 4: "refused 0", 5: "sent 1"}
	rows, err = db.Query(`SELECT id, status, done, reason FROM ipc_journal ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var status, done, reason string
		rows.Scan(&id, &status, &done, &reason)
		if got := status + " " + done; got != want[id] {
			t.Errorf("entry %d: %s, want %s", id, got, want[id])
		}
		if id == 4 && !strings.Contains(reason, "ask again") {
			t.Errorf("entry 4 reason %q", reason)
		}
		delete(want, id)
	}
	rows.Close()
	if len(want) != 0 {
		t.Errorf("entries missing: %v", want)
	}
	// Ids go on above the old ones.
	var seq int64
	db.QueryRow(`SELECT seq FROM sqlite_sequence WHERE name = 'ipc_journal'`).Scan(&seq)
	if seq != 5 {
		t.Errorf("next journal id after %d, want after 5", seq)
	}
}
