package nanoclaw

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An older NanoClaw database (before is_main and context_mode existed)
// still loads: folder "main" is main and tasks are isolated, as NanoClaw's
// own migrations would have it. A SQLite file that is not NanoClaw's is
// refused with the file to use instead.
func TestLoadOlderDatabaseAndRefuseOthers(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.db")
	db, err := sql.Open("sqlite3", old)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE registered_groups (jid TEXT PRIMARY KEY, name TEXT NOT NULL, folder TEXT NOT NULL UNIQUE, trigger_pattern TEXT NOT NULL, added_at TEXT NOT NULL, container_config TEXT, requires_trigger INTEGER DEFAULT 1)`,
		`CREATE TABLE scheduled_tasks (id TEXT PRIMARY KEY, group_folder TEXT NOT NULL, chat_jid TEXT NOT NULL, prompt TEXT NOT NULL, schedule_type TEXT NOT NULL, schedule_value TEXT NOT NULL, next_run TEXT, last_run TEXT, last_result TEXT, status TEXT DEFAULT 'active', created_at TEXT NOT NULL)`,
		`INSERT INTO registered_groups VALUES ('a@s.whatsapp.net', 'Me', 'main', '@Andy', '2025-01-01T00:00:00.000Z', NULL, 0), ('b@g.us', 'Fam', 'fam', '@Andy', 'bad date', NULL, 1)`,
		`INSERT INTO scheduled_tasks (id, group_folder, chat_jid, prompt, schedule_type, schedule_value, created_at) VALUES ('t1', 'fam', 'b@g.us', 'p', 'interval', '3600000', '2025-01-01T00:00:00.000Z'), ('t2', 'fam', 'b@g.us', 'p', 'cron', 'never', '2025-01-01T00:00:00.000Z')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	p, err := Load(old)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Groups) != 2 || p.Groups[0].Folder != "main" || !p.Groups[0].IsMain || p.Groups[1].IsMain || !p.Groups[1].RequiresTrigger {
		t.Errorf("groups %+v", p.Groups)
	}
	if len(p.Tasks) != 1 || p.Tasks[0].ContextMode != "isolated" || p.Tasks[0].Status != "active" {
		t.Errorf("tasks %+v", p.Tasks)
	}
	if len(p.Skipped) != 1 || !strings.Contains(p.Skipped[0], "task t2") {
		t.Errorf("skipped %q", p.Skipped)
	}

	other := filepath.Join(dir, "other.db")
	db, _ = sql.Open("sqlite3", other)
	db.Exec(`CREATE TABLE x (y)`)
	db.Close()
	if _, err := Load(other); err == nil || !strings.Contains(err.Error(), "store/messages.db") {
		t.Errorf("a foreign SQLite file: %v", err)
	}
	bad := filepath.Join(dir, "groups.json")
	os.WriteFile(bad, []byte(`[1]`), 0o600)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), "registered_groups.json") {
		t.Errorf("bad JSON: %v", err)
	}
}
