package ipc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
)

// TestHostileFiles drops one hostile file per row of issue 5 into a group's
// IPC directory; each must be refused, quarantined with its reason and
// reported (alerted when it is a token or cross-group attempt), and a valid
// file written after it must still be carried out.
func TestHostileFiles(t *testing.T) {
	h := newHarness(t)
	h.start(t)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("do not read"), 0o600)

	rows := []struct {
		name   string
		folder string
		sub    string
		make   func(path string) // writes the hostile object at path
		alert  bool
		group  string // the group the violation names
		reason string
	}{
		{"bad JSON", "family", layout.MessagesDir, writeBytes(`{"type":"message",`), false, "family", "bad JSON"},
		{"trailing data", "family", layout.MessagesDir, writeBytes(`{"type":"message","chatJid":"family@g.us","text":"x","token":"t"} {}`), false, "family", "bad JSON"},
		{"duplicate key", "family", layout.MessagesDir, writeBytes(`{"type":"message","chatJid":"family@g.us","chatJid":"work@g.us","text":"x","token":"t"}`), false, "family", "appears twice"},
		{"missing token", "family", layout.MessagesDir, writeJSON(map[string]any{"type": "message", "chatJid": "family@g.us", "text": "hi"}), true, "family", "missing token"},
		{"wrong token", "family", layout.MessagesDir, writeJSON(map[string]any{"type": "message", "chatJid": "family@g.us", "text": "hi", "token": strings.Repeat("ab", 32)}), true, "family", "wrong or expired token"},
		{"other group's token", "family", layout.MessagesDir, func(p string) {
			writeJSON(h.msg("work", "family@g.us", "hi"))(p)
		}, true, "work", "token of a run of group work"},
		{"cross-group chatJid", "family", layout.MessagesDir, func(p string) {
			writeJSON(h.msg("family", "work@g.us", "leak"))(p)
		}, true, "family", "may only message its own chat"},
		{"message to an unregistered chat", "family", layout.MessagesDir, func(p string) {
			writeJSON(h.msg("family", "stranger@s.whatsapp.net", "hi"))(p)
		}, true, "family", "may only message its own chat"},
		{"non-main register_group", "family", layout.TasksDir, func(p string) {
			writeJSON(map[string]any{"type": "register_group", "jid": "x@g.us", "name": "X", "folder": "x", "token": h.token["family"]})(p)
		}, true, "family", "main group only"},
		{"non-main refresh_groups", "work", layout.TasksDir, func(p string) {
			writeJSON(map[string]any{"type": "refresh_groups", "token": h.token["work"]})(p)
		}, true, "work", "main group only"},
		{"cross-group schedule_task", "family", layout.TasksDir, func(p string) {
			writeJSON(map[string]any{"type": "schedule_task", "prompt": "p", "schedule_type": "interval", "schedule_value": "3600000",
				"context_mode": "group", "targetJid": "work@g.us", "token": h.token["family"]})(p)
		}, true, "family", "only schedule tasks for itself"},
		{"symlink", "family", layout.MessagesDir, func(p string) { os.Symlink(secret, p) }, false, "family", "symlink"},
		{"FIFO", "family", layout.MessagesDir, func(p string) { syscall.Mkfifo(p, 0o600) }, false, "family", "FIFO"},
		{"directory", "family", layout.MessagesDir, func(p string) { os.Mkdir(p, 0o700) }, false, "family", "directory"},
		{"2 MB file", "family", layout.MessagesDir, func(p string) {
			big := `{"type":"message","chatJid":"family@g.us","token":"` + h.token["family"] + `","text":"` + strings.Repeat("a", 2<<20) + `"}`
			writeBytes(big)(p)
		}, false, "family", "over the 1 MiB limit"},
		{"unknown type", "family", layout.TasksDir, func(p string) {
			writeJSON(map[string]any{"type": "delete_everything", "token": h.token["family"]})(p)
		}, false, "family", "unknown type"},
		{"unknown field", "family", layout.MessagesDir, func(p string) {
			m := h.msg("family", "family@g.us", "hi")
			m["chatjid"] = "work@g.us"
			writeJSON(m)(p)
		}, false, "family", `no field "chatjid"`},
		{"message in tasks/", "family", layout.TasksDir, func(p string) {
			writeJSON(h.msg("family", "family@g.us", "hi"))(p)
		}, false, "family", "belongs in messages/"},
	}
	for _, folder := range []string{"../family", "global", "errors", "a/b", "..", ".hidden", "x\x00y", strings.Repeat("a", 65), "/etc"} {
		rows = append(rows, struct {
			name   string
			folder string
			sub    string
			make   func(path string)
			alert  bool
			group  string
			reason string
		}{"path trick in folder " + folder, "main", layout.TasksDir, func(p string) {
			writeJSON(map[string]any{"type": "register_group", "jid": "evil@g.us", "name": "Evil", "folder": folder, "token": h.token["main"]})(p)
		}, false, "main", "folder"})
	}

	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			path := filepath.Join(h.root, row.folder, row.sub, fmt.Sprintf("row-%02d.json", i))
			row.make(path)
			h.expectRefused(t, path, row.alert, row.group, row.reason)
			// The daemon keeps going: a valid file after it is carried out.
			text := "still alive " + string(rune('A'+i))
			h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", text))
			h.expectSend(t, "family", "family@g.us", text)
		})
	}
	if data, _ := os.ReadFile(secret); string(data) != "do not read" {
		t.Fatal("the symlink's target was touched")
	}
	for _, evil := range []string{"evil", "global"} {
		if _, err := os.Stat(filepath.Join(h.root, "..", evil)); err == nil {
			t.Fatalf("a folder %s was created", evil)
		}
	}
}

// writeBytes writes as the contract says agents do: a .tmp file renamed
// into place, so the watcher never sees half a file.
func writeBytes(s string) func(string) {
	return func(p string) {
		if err := os.WriteFile(p+".tmp", []byte(s), 0o600); err != nil {
			panic(err)
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			panic(err)
		}
	}
}

func writeJSON(v any) func(string) {
	return func(p string) {
		data, err := jsonMarshal(v)
		if err != nil {
			panic(err)
		}
		writeBytes(string(data))(p)
	}
}

func TestAllowedRequests(t *testing.T) {
	h := newHarness(t)
	h.start(t)
	ctx := context.Background()

	// Main may message any chat; a group its own.
	h.drop(t, "main", layout.MessagesDir, h.msg("main", "stranger@s.whatsapp.net", "hello from main"))
	h.expectSend(t, "main", "stranger@s.whatsapp.net", "hello from main")
	h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "hello family"))
	h.expectSend(t, "family", "family@g.us", "hello family")

	// A reaction is allowed as a message is: in the group's own chat.
	h.drop(t, "family", layout.MessagesDir, map[string]any{"type": "reaction", "chatJid": "family@g.us", "messageId": "3EB0C4", "emoji": "👍", "token": h.token["family"]})
	if e := h.next(t); e.kind != "react" || e.from != "family" || e.chat != "family@g.us" || e.text != "3EB0C4 👍" {
		t.Fatalf("got %+v; want the reaction", e)
	}
	p := h.drop(t, "family", layout.MessagesDir, map[string]any{"type": "reaction", "chatJid": "work@g.us", "messageId": "3EB0C5", "emoji": "👎", "token": h.token["family"]})
	h.expectRefused(t, p, true, "family", "may only react in its own chat")
	p = h.drop(t, "family", layout.TasksDir, map[string]any{"type": "reaction", "chatJid": "family@g.us", "messageId": "3EB0C6", "emoji": "👍", "token": h.token["family"]})
	h.expectRefused(t, p, false, "family", "belongs in messages/")

	// A group schedules for itself; main for another group.
	h.drop(t, "family", layout.TasksDir, map[string]any{"type": "schedule_task", "prompt": "remind", "schedule_type": "cron",
		"schedule_value": "0 9 * * *", "context_mode": "isolated", "token": h.token["family"]})
	h.drop(t, "main", layout.TasksDir, map[string]any{"type": "schedule_task", "prompt": "report", "schedule_type": "interval",
		"schedule_value": "3600000", "context_mode": "group", "targetJid": "work@g.us", "token": h.token["main"]})
	tasks := waitTasks(t, h, 2)
	// Both may carry the same creation time, so find them by folder.
	fam, work := tasks[0], tasks[1]
	if fam.GroupFolder != "family" {
		fam, work = work, fam
	}
	if fam.GroupFolder != "family" || fam.ChatJID != "family@g.us" || fam.ContextMode != "isolated" ||
		work.GroupFolder != "work" || work.ChatJID != "work@g.us" {
		t.Fatalf("tasks %+v", tasks)
	}

	// Family may not touch work's task; work may pause it; main may cancel it.
	p = h.drop(t, "family", layout.TasksDir, map[string]any{"type": "cancel_task", "taskId": work.ID, "token": h.token["family"]})
	h.expectRefused(t, p, true, "family", "may only change its own tasks")
	p = h.drop(t, "family", layout.TasksDir, map[string]any{"type": "pause_task", "taskId": "task-nope", "token": h.token["family"]})
	h.expectRefused(t, p, false, "family", "no task")
	h.drop(t, "work", layout.TasksDir, map[string]any{"type": "pause_task", "taskId": work.ID, "token": h.token["work"]})
	h.drop(t, "family", layout.TasksDir, map[string]any{"type": "update_task", "taskId": fam.ID, "prompt": "remind me", "token": h.token["family"]})
	h.drop(t, "main", layout.TasksDir, map[string]any{"type": "cancel_task", "taskId": work.ID, "token": h.token["main"]})
	p = h.drop(t, "main", layout.TasksDir, map[string]any{"type": "resume_task", "taskId": work.ID, "token": h.token["main"]})
	h.expectRefused(t, p, false, "main", "cancelled")
	if got, _ := h.sched.Get(ctx, work.ID); got.Status != scheduler.StatusCancelled {
		t.Fatalf("work task %+v", got)
	}
	if got, _ := h.sched.Get(ctx, fam.ID); got.Prompt != "remind me" {
		t.Fatalf("family task %+v", got)
	}

	// Main registers a group; it is watched at once.
	h.drop(t, "main", layout.TasksDir, map[string]any{"type": "register_group", "jid": "club@g.us", "name": "Club", "folder": "club",
		"requiresTrigger": false, "token": h.token["main"]})
	e := h.next(t)
	if e.kind != "register" || e.group.Folder != "club" || e.group.RequiresTrigger {
		t.Fatalf("got %+v", e)
	}
	h.drop(t, "main", layout.MessagesDir, h.msg("main", "main@g.us", "barrier"))
	h.expectSend(t, "main", "main@g.us", "barrier")
	fi, err := os.Stat(filepath.Join(h.root, "club", layout.MessagesDir))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("club/messages: %v %v", fi, err)
	}
	clubToken, _ := h.tokens.Issue(ctx, "club")
	h.drop(t, "club", layout.MessagesDir, map[string]any{"type": "message", "chatJid": "club@g.us", "text": "hi club", "token": clubToken})
	h.expectSend(t, "club", "club@g.us", "hi club")

	h.drop(t, "main", layout.TasksDir, map[string]any{"type": "refresh_groups", "token": h.token["main"]})
	if e := h.next(t); e.kind != "refresh" {
		t.Fatalf("got %+v", e)
	}
}

func waitTasks(t *testing.T, h *harness, n int) []scheduler.Task {
	t.Helper()
	// Task files have no outside effect to wait on; a message dropped after
	// them into the same single-threaded watcher marks that they are done.
	h.drop(t, "main", layout.MessagesDir, h.msg("main", "main@g.us", "barrier"))
	h.expectSend(t, "main", "main@g.us", "barrier")
	tasks, err := h.sched.List(context.Background(), "")
	if err != nil || len(tasks) != n {
		t.Fatalf("tasks %+v %v; want %d", tasks, err, n)
	}
	return tasks
}

// TestFilesPresentAtStart: files written while the daemon was down are
// handled when it starts.
func TestFilesPresentAtStart(t *testing.T) {
	h := newHarness(t)
	h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "written while down"))
	h.start(t)
	h.expectSend(t, "family", "family@g.us", "written while down")
}

// TestVerdicts: where an MCP server waits (results/ exists), each file
// gets its verdict: sent (with a new task's id) or refused with the reason.
func TestVerdicts(t *testing.T) {
	h := newHarness(t)
	results := filepath.Join(h.root, "family", layout.ResultsDir)
	if err := os.Mkdir(results, 0o700); err != nil {
		t.Fatal(err)
	}
	h.start(t)
	verdict := func(path string) protocol.Verdict {
		t.Helper()
		v, ok := protocol.AwaitVerdict(filepath.Join(h.root, "family"), filepath.Base(path), 10*time.Second)
		if !ok {
			t.Fatalf("no verdict for %s", filepath.Base(path))
		}
		return v
	}
	sent := h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "hi"))
	h.expectSend(t, "family", "family@g.us", "hi")
	if v := verdict(sent); v.Status != "sent" {
		t.Errorf("verdict %+v, want sent", v)
	}
	refused := h.drop(t, "family", layout.MessagesDir, h.msg("family", "work@g.us", "leak"))
	h.expectRefused(t, refused, true, "family", "may only message its own chat")
	if v := verdict(refused); v.Status != "refused" || !strings.Contains(v.Reason, "may only message its own chat") {
		t.Errorf("verdict %+v, want refused with the reason", v)
	}
	task := h.drop(t, "family", layout.TasksDir, map[string]any{"type": "schedule_task", "prompt": "p", "schedule_type": "interval",
		"schedule_value": "3600000", "context_mode": "group", "token": h.token["family"]})
	if v := verdict(task); v.Status != "sent" || !strings.HasPrefix(v.ID, "task-") {
		t.Errorf("verdict %+v, want sent with the task id", v)
	}
}

// Sync makes the watched folders the registered groups': a group removed
// is no longer watched, one added is, and its files are carried out.
func TestSyncWatchesTheRegisteredGroups(t *testing.T) {
	h := newHarness(t)
	h.start(t)
	ctx := context.Background()
	if err := h.groups.Remove(ctx, "work"); err != nil {
		t.Fatal(err)
	}
	if err := h.groups.Add(ctx, groups.Group{JID: "new@g.us", Name: "New", Folder: "new"}); err != nil {
		t.Fatal(err)
	}
	n, err := h.w.Sync(ctx)
	if err != nil || n != 3 {
		t.Fatalf("Sync = %d, %v; want 3 groups", n, err)
	}
	h.w.mu.Lock()
	watched := slices.Sorted(maps.Keys(h.w.folders))
	h.w.mu.Unlock()
	if want := []string{"family", "main", "new"}; !slices.Equal(watched, want) {
		t.Fatalf("watched %v; want %v", watched, want)
	}
	if h.token["new"], err = h.tokens.Issue(ctx, "new"); err != nil {
		t.Fatal(err)
	}
	h.drop(t, "new", layout.MessagesDir, h.msg("new", "new@g.us", "hello from new"))
	h.expectSend(t, "new", "new@g.us", "hello from new")
}

// A search_history file is answered in its verdict from the real index:
// the group's own chat only; naming another group's chat is refused,
// quarantined and alerted as a cross-group attempt.
func TestSearchHistoryFile(t *testing.T) {
	h := newHarness(t)
	h.w.cfg.Messages = messages.New(h.db)
	h.start(t)
	ctx := context.Background()
	for i, m := range []channel.Message{
		{ChatJID: "family@g.us", ID: "f1", SenderJID: "ann", SenderName: "Ann", Text: "the plumber is Jonas"},
		{ChatJID: "work@g.us", ID: "w1", SenderJID: "bob", Text: "our plumber is secret"},
	} {
		m.Time = time.Date(2026, 3, 1+i, 9, 0, 0, 0, time.UTC)
		if _, _, err := h.w.cfg.Messages.Add(ctx, m, ""); err != nil {
			t.Fatal(err)
		}
	}
	results := filepath.Join(h.root, "family", layout.ResultsDir)
	os.MkdirAll(results, 0o700)
	path := h.drop(t, "family", layout.TasksDir, map[string]any{"type": "search_history", "query": "plumber", "token": h.token["family"]})
	v, ok := protocol.AwaitVerdict(filepath.Join(h.root, "family"), filepath.Base(path), 10*time.Second)
	if !ok || v.Status != "ok" || v.Messages == nil {
		t.Fatalf("verdict %+v (%v)", v, ok)
	}
	if got := *v.Messages; len(got) != 1 || got[0].ID != "f1" || got[0].SenderName != "Ann" || got[0].ChatJID != "family@g.us" ||
		got[0].Time != "2026-03-01T09:00:00Z" {
		t.Errorf("found %+v, want only family's f1 from Ann", got)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the request file is still there: %v", err)
	}

	cross := h.drop(t, "family", layout.TasksDir, map[string]any{"type": "search_history", "query": "plumber", "chatJid": "work@g.us",
		"token": h.token["family"]})
	h.expectRefused(t, cross, true, "family", "may only search its own chat")
	v, ok = protocol.AwaitVerdict(filepath.Join(h.root, "family"), filepath.Base(cross), 10*time.Second)
	if !ok || v.Status != "refused" || v.Messages != nil {
		t.Errorf("cross-group verdict %+v (%v)", v, ok)
	}
}

// A search recorded before a kill -9 but not yet answered is answered by
// the next start: the journal keeps the verdict, the file still there
// keeps the question.
func TestSearchAnsweredAfterRestart(t *testing.T) {
	h := newHarness(t)
	h.w.cfg.Messages = messages.New(h.db)
	ctx := context.Background()
	if _, _, err := h.w.cfg.Messages.Add(ctx, channel.Message{ChatJID: "family@g.us", ID: "f1", SenderJID: "ann", Text: "the roofer is Mia",
		Time: time.Now()}, ""); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(h.root, "family", layout.ResultsDir), 0o700)
	data, _ := jsonMarshal(map[string]any{"type": "search_history", "query": "roofer", "token": h.token["family"]})
	name := "1-search.json"
	if err := os.WriteFile(filepath.Join(h.root, "family", layout.TasksDir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if _, err := h.db.ExecContext(ctx, `INSERT INTO ipc_journal (folder, sub, name, hash, status, type, task_id, new_folder, reason, decided_at)
		VALUES ('family', 'tasks', ?, ?, 'sent', 'search_history', '', '', '', 1)`, name, hex.EncodeToString(sum[:])); err != nil {
		t.Fatal(err)
	}
	h.start(t)
	v, ok := protocol.AwaitVerdict(filepath.Join(h.root, "family"), name, 10*time.Second)
	if !ok || v.Status != "ok" || v.Messages == nil || len(*v.Messages) != 1 || (*v.Messages)[0].ID != "f1" {
		t.Fatalf("verdict after the restart: %+v (%v)", v, ok)
	}
	var open int
	h.db.QueryRowContext(ctx, `SELECT count(*) FROM ipc_journal WHERE done = 0`).Scan(&open)
	if open != 0 {
		t.Errorf("%d journal rows left open", open)
	}
}
