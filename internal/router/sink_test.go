package router

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/messages"
)

// Which messages start a run: in the main group every one; elsewhere one
// from an allowed sender holding the trigger, or any while a run of the
// group goes (it becomes a follow-up). Everything of a registered group
// is stored; a redelivery or the assistant's own echo starts nothing.
func TestSinkStoresAndTriggers(t *testing.T) {
	tests := []struct {
		name    string
		chat    string
		sender  string
		text    string
		running bool
		bot     bool
		runs    []string
	}{
		{name: "main, no trigger needed", chat: mainJID, sender: "owner", text: "hello", runs: []string{"main"}},
		{name: "group without the trigger stays context", chat: famJID, sender: alice, text: "dinner at 7"},
		{name: "group with the trigger", chat: famJID, sender: alice, text: "@Andy dinner?", runs: []string{"family"}},
		{name: "trigger from a sender not allowed", chat: famJID, sender: mallory, text: "@Andy read me the notes"},
		{name: "chatter while a run goes is a follow-up", chat: famJID, sender: mallory, text: "and me", running: true, runs: []string{"family"}},
		{name: "the assistant's own echo", chat: famJID, sender: alice, text: "@Andy said so", bot: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.running["family"] = tt.running
			m := channel.Message{ChatJID: tt.chat, ID: "m1", SenderJID: tt.sender, Text: tt.text, Time: time.Now(), IsBot: tt.bot}
			for range 2 { // the second is a redelivery
				if err := e.r.OnMessage(context.Background(), m); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(e.enqueued, tt.runs) {
				t.Errorf("runs queued = %q, want %q", e.enqueued, tt.runs)
			}
			var n int
			e.db.QueryRowContext(context.Background(), `SELECT count(*) FROM messages WHERE chat_jid = ?`, tt.chat).Scan(&n)
			if n != 1 {
				t.Errorf("%d messages stored, want 1", n)
			}
		})
	}
}

// A chat that is not registered leaves its name and activity, never its
// messages.
func TestSinkUnregisteredChat(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.r.OnChat(ctx, channel.Chat{JID: "x@g.us", Name: "Strangers", IsGroup: true}); err != nil {
		t.Fatal(err)
	}
	e.post("x@g.us", alice, "1", "@Andy psst")
	chats, err := e.msgs.ListChats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(chats) != 1 || chats[0].Name != "Strangers" || chats[0].Time.IsZero() {
		t.Errorf("chats = %+v, want Strangers with its last activity", chats)
	}
	var n int
	e.db.QueryRowContext(ctx, `SELECT count(*) FROM messages`).Scan(&n)
	if n != 0 || len(e.enqueued) != 0 {
		t.Errorf("an unregistered chat stored %d messages and queued %q", n, e.enqueued)
	}
}

// "/new" from who may call the assistant resets the session and answers
// at once: the notice and the cursor past everything said so far move
// together, a running agent is asked to finish, and no run is queued.
// From anyone else it is an ordinary message.
func TestSinkNewSession(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.msgs.SaveSession(ctx, "family", "s1", time.Now()); err != nil {
		t.Fatal(err)
	}
	e.post(famJID, alice, "1", "@Andy remember the milk")
	e.post(famJID, mallory, "2", "/new")
	if id, _ := e.msgs.Session(ctx, "family"); id != "s1" {
		t.Fatalf("a sender not allowed reset the session (now %q)", id)
	}
	e.enqueued, e.running["family"] = nil, true
	e.post(famJID, alice, "3", " /NEW ")
	if id, _ := e.msgs.Session(ctx, "family"); id != "" {
		t.Errorf("session after /new = %q, want none", id)
	}
	if got := e.unanswered(famJID); len(got) != 0 {
		t.Errorf("unanswered after /new = %q, want none", got)
	}
	if got := e.queued(famJID); len(got) != 1 {
		t.Errorf("queued %q, want one notice", got)
	}
	if len(e.enqueued) != 0 {
		t.Errorf("/new queued a run: %q", e.enqueued)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.DataDir, "ipc", "family", "input", "_close")); err != nil {
		t.Errorf("the running agent was not asked to finish: %v", err)
	}
}

// Edits and deletions reach only messages the agent has not answered: a
// deleted one is gone from the next prompt, an edited one carries its new
// text (and an edit that adds the trigger starts a run); after the answer,
// an edit is a new "(edited)" message and a deletion changes nothing.
func TestSinkEditsAndDeletions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	post := func(m channel.Message) {
		t.Helper()
		m.ChatJID, m.SenderJID, m.Time = famJID, alice, time.Now()
		if err := e.r.OnMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	post(channel.Message{ID: "a", Text: "my pin is 1234"})
	post(channel.Message{ID: "b", Text: "what's for dinner"})
	post(channel.Message{ID: "del-a", Revokes: "a"})
	post(channel.Message{ID: "edit-b", Replaces: "b", Text: "@Andy what's for dinner?"})
	if got := e.unanswered(famJID); len(got) != 1 || got[0] != "@Andy what's for dinner?" {
		t.Fatalf("messages after delete and edit: %q", got)
	}
	if len(e.enqueued) != 1 {
		t.Errorf("runs queued = %q, want one (the edit added the trigger)", e.enqueued)
	}
	msgs, _ := e.msgs.Unanswered(ctx, famJID)
	if err := e.msgs.Answer(ctx, e.r.Outbox, messages.Answer{Chat: famJID, UpTo: msgs[0].Seq}); err != nil {
		t.Fatal(err)
	}
	post(channel.Message{ID: "edit-b2", Replaces: "b", Text: "never mind"})
	post(channel.Message{ID: "del-b", Revokes: "b"})
	if got := e.unanswered(famJID); len(got) != 1 || got[0] != "(edited) never mind" {
		t.Fatalf("unanswered after an edit and a delete of an answered message: %q", got)
	}
}
