package router

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

type queueFunc func(folder string)

func (f queueFunc) EnqueueMessages(folder string) { f(folder) }
func (f queueFunc) Running(string) bool           { return false }

// Edits and deletions reach only messages the agent has not answered: a
// deleted one is gone from the next prompt, an edited one carries its new
// text (and an edit that adds the trigger starts a run); after the answer,
// an edit is a new "(edited)" message and a deletion changes nothing.
func TestEditsAndDeletions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reg := groups.New(db, filepath.Join(dir, "groups"))
	const jid = "120363000000000002@g.us"
	if err := reg.Add(ctx, groups.Group{JID: jid, Name: "Family", Folder: "family", Trigger: "@Andy", RequiresTrigger: true}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	cfg := &config.Config{GroupsDir: filepath.Join(dir, "groups")}
	r := &Router{Messages: messages.New(db), Groups: reg, Queue: queueFunc(func(string) { runs++ }), Config: func() *config.Config { return cfg }}
	post := func(m channel.Message) {
		t.Helper()
		m.ChatJID, m.Sender, m.SenderName, m.Time = jid, "49170@s.whatsapp.net", "Alice", time.Now()
		if err := r.OnMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	texts := func() (out []string) {
		rows, err := db.Query(`SELECT text FROM messages WHERE chat_jid = ? ORDER BY seq`, jid)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			rows.Scan(&s)
			out = append(out, s)
		}
		return out
	}
	post(channel.Message{ID: "a", Text: "my pin is 1234"})
	post(channel.Message{ID: "b", Text: "what's for dinner"})
	post(channel.Message{ID: "del-a", Revokes: "a"})
	post(channel.Message{ID: "edit-b", Replaces: "b", Text: "@Andy what's for dinner?"})
	if got := texts(); len(got) != 1 || got[0] != "@Andy what's for dinner?" {
		t.Fatalf("messages after delete and edit: %q", got)
	}
	if runs != 1 {
		t.Errorf("%d runs queued, want 1 (the edit added the trigger)", runs)
	}
	// The agent answered everything so far.
	if _, err := db.Exec(`INSERT INTO cursors (chat_jid, answered_seq) VALUES (?, (SELECT max(seq) FROM messages))`, jid); err != nil {
		t.Fatal(err)
	}
	post(channel.Message{ID: "edit-b2", Replaces: "b", Text: "never mind"})
	post(channel.Message{ID: "del-b", Revokes: "b"})
	if got := texts(); len(got) != 2 || got[0] != "@Andy what's for dinner?" || got[1] != "(edited) never mind" {
		t.Fatalf("messages after answered edit/delete: %q", got)
	}
}
