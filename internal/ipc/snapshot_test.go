package ipc

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// seen records chats as the daemon's channels would, and registers the
// groups given: a real chat table and registry for the snapshot to read.
func seen(t *testing.T, db *store.DB, l layout.Layout, chats []channel.Chat, registered ...groups.Group) (*messages.Store, *groups.Registry) {
	t.Helper()
	msgs, reg := messages.New(db), groups.New(db, l.GroupsDir)
	for _, c := range chats {
		if err := msgs.RecordChat(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range registered {
		if err := reg.Add(context.Background(), g); err != nil {
			t.Fatal(err)
		}
	}
	return msgs, reg
}

// snapshotStore is a fresh SQLite store and layout, closed with the test.
func snapshotStore(t *testing.T) (*store.DB, layout.Layout) {
	dir := t.TempDir()
	db, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, layout.New(dir, t.TempDir())
}

// The main group's agent sees every task and the group chats it may
// register; another group sees its own tasks and no chats; a task change
// reaches the files of every group refreshed before.
func TestSnapshotsMainSeesAllOthersTheirOwn(t *testing.T) {
	db, l := snapshotStore(t)
	msgs, reg := seen(t, db, l, []channel.Chat{
		{JID: "old@g.us", Name: "Old", IsGroup: true, Time: time.Unix(100, 0)},
		{JID: "new@g.us", Name: "New", IsGroup: true, Time: time.Unix(200, 0)},
		{JID: "alice@s.whatsapp.net", Name: "Alice", Time: time.Unix(300, 0)},
	}, groups.Group{JID: "old@g.us", Name: "Old", Folder: "old"})
	snaps := NewSnapshots(l, db, msgs, reg, zerolog.Nop())
	sched := scheduler.New(db, time.UTC, nil, snaps, zerolog.Nop())
	ctx := context.Background()
	create := func(folder string) {
		t.Helper()
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := sched.Create(ctx, tx, scheduler.NewTask{GroupFolder: folder, ChatJID: folder + "@g.us", Prompt: "p " + folder,
			ScheduleType: scheduler.TypeInterval, ScheduleValue: "600000", ContextMode: scheduler.ContextIsolated}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"main", "family", "work"} {
		create(f)
	}
	tasks := func(folder string) []scheduler.Task {
		t.Helper()
		var ts []scheduler.Task
		data, err := os.ReadFile(l.IPC(folder).TasksSnapshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &ts); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	groupsOf := func(folder string) []AvailableGroup {
		t.Helper()
		var snap struct {
			Groups []AvailableGroup `json:"groups"`
		}
		data, err := os.ReadFile(l.IPC(folder).GroupsSnapshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &snap); err != nil {
			t.Fatal(err)
		}
		return snap.Groups
	}
	if err := snaps.Refresh(ctx, "main", true); err != nil {
		t.Fatal(err)
	}
	if err := snaps.Refresh(ctx, "family", false); err != nil {
		t.Fatal(err)
	}
	if n := len(tasks("main")); n != 3 {
		t.Errorf("main sees %d tasks, want 3", n)
	}
	if fam := tasks("family"); len(fam) != 1 || fam[0].GroupFolder != "family" {
		t.Errorf("family sees %+v", fam)
	}
	var jids []string
	for _, g := range groupsOf("main") {
		jids = append(jids, g.JID)
	}
	if strings.Join(jids, ",") != "new@g.us,old@g.us" {
		t.Errorf("main sees group chats %v, want the groups newest first", jids)
	}
	if g := groupsOf("main"); !g[1].IsRegistered || g[0].IsRegistered {
		t.Errorf("isRegistered wrong: %+v", g)
	}
	if g := groupsOf("family"); len(g) != 0 {
		t.Errorf("family sees group chats %+v", g)
	}

	create("family")
	snaps.TasksChanged(ctx) // what the scheduler calls after a change
	if n := len(tasks("family")); n != 2 {
		t.Errorf("after a change family sees %d tasks, want 2", n)
	}
	if n := len(tasks("main")); n != 4 {
		t.Errorf("after a change main sees %d tasks, want 4", n)
	}
	if _, err := os.Stat(l.IPC("work").TasksSnapshot()); !os.IsNotExist(err) {
		t.Errorf("work, never refreshed, got a file: %v", err)
	}
}

// A refresh that would change nothing leaves the files as they are (an
// agent's start need not pay for replacing them); a changed list, or a
// file gone, is written again.
func TestSnapshotsRewriteOnlyWhatChanged(t *testing.T) {
	db, l := snapshotStore(t)
	msgs, reg := seen(t, db, l, []channel.Chat{{JID: "a@g.us", Name: "A", IsGroup: true, Time: time.Unix(100, 0)}})
	snaps := NewSnapshots(l, db, msgs, reg, zerolog.Nop())
	ctx := context.Background()
	refresh := func() {
		t.Helper()
		if err := snaps.Refresh(ctx, "main", true); err != nil {
			t.Fatal(err)
		}
	}
	inode := func(path string) uint64 {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	tasksFile, groupsFile := l.IPC("main").TasksSnapshot(), l.IPC("main").GroupsSnapshot()
	refresh()
	t0, g0 := inode(tasksFile), inode(groupsFile)
	refresh()
	if inode(tasksFile) != t0 || inode(groupsFile) != g0 {
		t.Error("a refresh with nothing changed replaced the files")
	}

	if err := msgs.RecordChat(ctx, channel.Chat{JID: "b@g.us", Name: "B", IsGroup: true, Time: time.Unix(200, 0)}); err != nil {
		t.Fatal(err)
	}
	refresh()
	if inode(groupsFile) == g0 {
		t.Error("a new chat did not rewrite available_groups.json")
	}
	if data, _ := os.ReadFile(groupsFile); !strings.Contains(string(data), "b@g.us") || !strings.Contains(string(data), "lastSync") {
		t.Errorf("available_groups.json = %s", data)
	}
	if inode(tasksFile) != t0 {
		t.Error("current_tasks.json was replaced though no task changed")
	}

	os.Remove(tasksFile)
	refresh()
	if data, err := os.ReadFile(tasksFile); err != nil || strings.TrimSpace(string(data)) != "[]" {
		t.Errorf("a removed current_tasks.json was not written again: %q, %v", data, err)
	}
}
