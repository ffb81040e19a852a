package nanoclaw_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/groupfstest"
)

func TestMain(m *testing.M) { e2e.Main(m) }

// schema is NanoClaw v1's (src/db.ts, createSchema, with the columns its
// later migrations add).
const schema = `
CREATE TABLE chats (jid TEXT PRIMARY KEY, name TEXT, last_message_time TEXT, channel TEXT, is_group INTEGER DEFAULT 0);
CREATE TABLE messages (id TEXT, chat_jid TEXT, sender TEXT, sender_name TEXT, content TEXT, timestamp TEXT,
  is_from_me INTEGER, is_bot_message INTEGER DEFAULT 0, reply_to_message_id TEXT, reply_to_message_content TEXT,
  reply_to_sender_name TEXT, PRIMARY KEY (id, chat_jid), FOREIGN KEY (chat_jid) REFERENCES chats(jid));
CREATE TABLE scheduled_tasks (id TEXT PRIMARY KEY, group_folder TEXT NOT NULL, chat_jid TEXT NOT NULL, prompt TEXT NOT NULL,
  schedule_type TEXT NOT NULL, schedule_value TEXT NOT NULL, next_run TEXT, last_run TEXT, last_result TEXT,
  status TEXT DEFAULT 'active', created_at TEXT NOT NULL, context_mode TEXT DEFAULT 'isolated', script TEXT);
CREATE TABLE task_run_logs (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, run_at TEXT NOT NULL,
  duration_ms INTEGER NOT NULL, status TEXT NOT NULL, result TEXT, error TEXT);
CREATE TABLE router_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE sessions (group_folder TEXT PRIMARY KEY, session_id TEXT NOT NULL);
CREATE TABLE registered_groups (jid TEXT PRIMARY KEY, name TEXT NOT NULL, folder TEXT NOT NULL UNIQUE,
  trigger_pattern TEXT NOT NULL, added_at TEXT NOT NULL, container_config TEXT, requires_trigger INTEGER DEFAULT 1,
  is_main INTEGER DEFAULT 0);
INSERT INTO registered_groups VALUES ('local:me', 'Me', 'main', '@Andy', '2026-01-10T10:00:00.000Z', NULL, 0, 1);
INSERT INTO registered_groups VALUES ('local:family', 'Family', 'family', '@Andy', '2026-01-11T10:00:00.000Z',
  '{"additionalMounts":[{"hostPath":"/srv/recipes","readonly":true},{"hostPath":"/srv/shared","readonly":false}],"timeout":600000}', 1, 0);
INSERT INTO scheduled_tasks VALUES ('task-1', 'family', 'local:family', 'water the plants', 'cron', '0 9 * * *',
  NULL, NULL, NULL, 'active', '2026-01-12T10:00:00.000Z', 'group', NULL);
INSERT INTO scheduled_tasks VALUES ('task-2', 'main', 'local:me', 'weekly review', 'interval', '604800000',
  NULL, NULL, NULL, 'paused', '2026-01-12T10:00:00.000Z', 'isolated', NULL);
INSERT INTO scheduled_tasks VALUES ('task-3', 'main', 'local:me', 'done once', 'once', '2026-01-13T10:00:00',
  NULL, NULL, NULL, 'completed', '2026-01-12T10:00:00.000Z', 'isolated', NULL);
INSERT INTO sessions VALUES ('family', 'sess-from-nanoclaw');
`

// nanoClawInstall lays out a NanoClaw installation as it lies on disk:
// store/messages.db (schema) and the groups' notes beside it; it returns
// the database's path.
func nanoClawInstall(t *testing.T) string {
	t.Helper()
	nc := t.TempDir()
	os.MkdirAll(filepath.Join(nc, "store"), 0o755)
	dbPath := filepath.Join(nc, "store", "messages.db")
	src, err := sql.Open("sqlite3", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Exec(schema); err != nil {
		t.Fatal(err)
	}
	src.Close()
	for folder, notes := range map[string]string{"family": "# Family\nGrandma visits on Sundays.\n", "global": "# Everyone\nThe house is in Berlin.\n"} {
		os.MkdirAll(filepath.Join(nc, "groups", folder), 0o755)
		os.WriteFile(filepath.Join(nc, "groups", folder, "CLAUDE.md"), []byte(notes), 0o644)
	}
	return dbPath
}

// A NanoClaw installation as it lies on disk: store/messages.db and the
// groups' notes beside it. The import is dry-run, then done, then done
// again (nothing changes), and the running daemon resumes the session.
func TestImportFromNanoClawSQLite(t *testing.T) {
	dbPath := nanoClawInstall(t)

	in := e2e.New(t, e2e.Options{})
	plan := in.CLI("groups", "import", dbPath, "--dry-run")
	for _, want := range []string{"would add main group main", "would add group family", "allowRead [/srv/recipes]",
		"would copy family/CLAUDE.md", "would copy global/CLAUDE.md", "would add task task-1", "would add task task-2",
		"would record the session id of family", "dry run: nothing was changed"} {
		if !strings.Contains(plan, want) {
			t.Errorf("dry run lacks %q:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "task-3") {
		t.Errorf("a finished task is in the plan:\n%s", plan)
	}
	if out := in.CLI("groups", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("the dry run registered groups: %s", out)
	}

	in.CLI("groups", "import", dbPath)
	var list []struct {
		Folder, Trigger string
		IsMain          bool
		Security        *struct{ AllowRead, AllowWrite []string }
	}
	if err := json.Unmarshal([]byte(in.CLI("groups", "list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || !list[0].IsMain || list[1].Folder != "family" || list[1].Security == nil ||
		list[1].Security.AllowRead[0] != "/srv/recipes" || list[1].Security.AllowWrite[0] != "/srv/shared" {
		t.Fatalf("groups after import: %+v", list)
	}
	if b, _ := os.ReadFile(filepath.Join(in.Dir, "groups", "family", "CLAUDE.md")); !strings.Contains(string(b), "Grandma") {
		t.Errorf("family's notes were not copied: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(in.Dir, "groups", "global", "CLAUDE.md")); !strings.Contains(string(b), "Berlin") {
		t.Errorf("the shared notes were not copied: %q", b)
	}
	tasks := func() (n, paused int) {
		db, err := sql.Open("sqlite3", filepath.Join(in.Dir, "data", "nanoclaw.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.QueryRow(`SELECT count(*), count(*) FILTER (WHERE status = 'paused') FROM scheduled_tasks`).Scan(&n, &paused)
		return n, paused
	}
	if n, paused := tasks(); n != 2 || paused != 1 {
		t.Errorf("%d tasks (%d paused), want 2 (1 paused)", n, paused)
	}

	again := in.CLI("groups", "import", dbPath)
	if strings.Contains(again, "add ") || !strings.Contains(again, "imported 0 group(s), 2 already registered; 0 task(s)") || !strings.Contains(again, "keep group family") || !strings.Contains(again, "keep task task-1") {
		t.Errorf("a second import changed something:\n%s", again)
	}
	if n, _ := tasks(); n != 2 {
		t.Errorf("%d tasks after a second import, want 2", n)
	}

	in.Start()
	in.Post("local:family", "Ann", "@Andy session")
	in.WaitFor("local:family", e2e.Equals("session: sess-from-nanoclaw"))
}

// Folders an import writes into may hold what a removed group's agent left:
// a CLAUDE.md linked into a host directory is replaced, never written
// through (a dangling one included, which a plain write would create).
func TestImportDoesNotFollowLinkedNotes(t *testing.T) {
	dbPath := nanoClawInstall(t)
	in := e2e.New(t, e2e.Options{})
	c := groupfstest.NewCanary(t)
	c.Link(t, filepath.Join(in.Dir, "groups", "family", "CLAUDE.md"), filepath.Join(c.Dir, "notes.txt"))
	c.Link(t, filepath.Join(in.Dir, "groups", "global", "CLAUDE.md"), filepath.Join(c.Dir, "planted.md"))
	in.CLI("groups", "import", dbPath)
	c.Intact(t)
	for folder, want := range map[string]string{"family": "Grandma", "global": "Berlin"} {
		path := filepath.Join(in.Dir, "groups", folder, "CLAUDE.md")
		fi, err := os.Lstat(path)
		b, _ := os.ReadFile(path)
		if err != nil || !fi.Mode().IsRegular() || !strings.Contains(string(b), want) {
			t.Errorf("%s/CLAUDE.md: %v, %v, %q; want a file of its own with the imported notes", folder, fi, err, b)
		}
	}
}
