package daemon_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/nanoclawd/nanoclawd/internal/e2e"
)

// nanoclawInstall builds what NanoClaw v1 leaves on disk: store/messages.db
// (from its published schema) with groups, a task and a session, and
// groups/*/CLAUDE.md beside it. It returns the database's path.
func nanoclawInstall(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"store", "groups/main", "groups/family", "groups/global"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	schema, err := os.ReadFile(filepath.Join("..", "nanoclaw", "testdata", "nanoclaw-v1.sql"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "store", "messages.db")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	due := time.Now().Add(-time.Minute).UTC().Format("2006-01-02T15:04:05.000Z")
	for _, q := range []string{
		string(schema),
		`INSERT INTO registered_groups (jid, name, folder, trigger_pattern, added_at, container_config, requires_trigger, is_main) VALUES
			('local:owner', 'Owner', 'main', '@Andy', '2026-01-01T00:00:00.000Z', NULL, 0, 1),
			('local:family', 'Family', 'family', '@Andy', '2026-01-02T00:00:00.000Z', NULL, 1, 0),
			('local:work', 'Work', 'work', '@Andy', '2026-01-03T00:00:00.000Z',
			 '{"additionalMounts":[{"hostPath":"/srv/shared","readonly":false},{"hostPath":"/srv/docs"}],"timeout":600000}', 1, 0)`,
		`INSERT INTO scheduled_tasks (id, group_folder, chat_jid, prompt, schedule_type, schedule_value, next_run, status, created_at, context_mode) VALUES
			('task-1700000000000-abc123', 'family', 'local:family', 'echo imported task ran', 'once', '2026-01-05T09:00:00', '` + due + `', 'active', '2026-01-04T00:00:00.000Z', 'isolated'),
			('task-1700000000001-def456', 'family', 'local:family', 'weekly plan', 'cron', '0 9 * * 1', NULL, 'paused', '2026-01-04T00:00:00.000Z', 'group')`,
		`INSERT INTO sessions (group_folder, session_id) VALUES ('family', 'nc-session-1')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for folder, text := range map[string]string{"main": "MAIN-MEMORY\n", "family": "FAMILY-MEMORY\n", "global": "GLOBAL-MEMORY\n"} {
		if err := os.WriteFile(filepath.Join(root, "groups", folder, "CLAUDE.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// groups import takes over a NanoClaw installation's SQLite database:
// groups (main, trigger, container mounts), tasks, sessions and memories;
// a dry run changes nothing; a second import changes nothing; the running
// daemon picks it all up.
func TestImportNanoClawDatabase(t *testing.T) {
	src := nanoclawInstall(t)
	in := e2e.New(t, e2e.Options{})
	in.Start()

	plan := in.CLI("groups", "import", src, "--dry-run")
	for _, want := range []string{
		"group main (local:owner) as the main group: would add", "group family (local:family): would add",
		"task task-1700000000000-abc123 (family, once 2026-01-05T09:00:00, active): would add",
		"session of family: would resume nc-session-1", "memory " + filepath.Join(filepath.Dir(filepath.Dir(src)), "groups", "family", "CLAUDE.md") + ": would copy",
		"not imported: group work: read-only mount /srv/docs", "dry run: would import 3 group(s) (0 already registered), 2 task(s), 1 session(s), 3 memory file(s)",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("dry run lacks %q:\n%s", want, plan)
		}
	}
	if out := in.CLI("groups", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("the dry run changed the groups: %s", out)
	}

	// The imported session's transcript, where the stand-in agent keeps them.
	os.MkdirAll(filepath.Join(in.Dir, "data", "sessions", "family"), 0o700)
	os.WriteFile(filepath.Join(in.Dir, "data", "sessions", "family", "nc-session-1"), nil, 0o600)

	if out := in.CLI("groups", "import", src); !strings.Contains(out, "imported 3 group(s), 0 already registered; 2 task(s), 1 session(s), 3 memory file(s)") {
		t.Errorf("import: %s", out)
	}
	if out := in.CLI("groups", "import", src); !strings.Contains(out, "imported 0 group(s), 3 already registered; 0 task(s), 0 session(s), 0 memory file(s)") {
		t.Errorf("second import: %s", out)
	}
	var list []struct {
		Folder          string
		IsMain          bool
		RequiresTrigger bool
		Security        *struct{ AllowWrite []string }
	}
	if err := json.Unmarshal([]byte(in.CLI("groups", "list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].Folder != "main" || !list[0].IsMain || !list[1].RequiresTrigger ||
		list[2].Folder != "work" || list[2].Security == nil || strings.Join(list[2].Security.AllowWrite, ",") != "/srv/shared" {
		t.Errorf("groups after import: %+v", list)
	}
	for folder, want := range map[string]string{"main": "MAIN-MEMORY\n", "family": "FAMILY-MEMORY\n", "global": "GLOBAL-MEMORY\n"} {
		if b, _ := os.ReadFile(filepath.Join(in.Dir, "groups", folder, "CLAUDE.md")); string(b) != want {
			t.Errorf("groups/%s/CLAUDE.md = %q, want NanoClaw's", folder, b)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(in.Dir, "groups", "work", "CLAUDE.md")); !strings.Contains(string(b), "You are Andy") {
		t.Errorf("work had no NanoClaw memory and got no persona: %q", b)
	}

	// The running daemon: the due task runs, the session resumes.
	in.WaitFor("local:family", e2e.Equals("echo: imported task ran"))
	in.Post("local:family", "Alice", "@Andy session")
	in.WaitFor("local:family", e2e.Equals("session: nc-session-1"))
}
