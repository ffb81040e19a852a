package messages

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/rs/zerolog"
)

const chat = "120363000000000002@g.us"

func open(t *testing.T) *Store {
	t.Helper()
	db, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return New(db)
}

// outboxOf is an outbox over s's database that is never run: the tests
// read what it queued.
func outboxOf(s *Store) *outbox.Outbox { return outbox.New(s.db, nil, nil, zerolog.Nop()) }

func add(t *testing.T, s *Store, id, text string) int64 {
	t.Helper()
	seq, added, err := s.Add(context.Background(), channel.Message{ChatJID: chat, ID: id, SenderJID: "alice", Text: text, Time: time.Now()}, "")
	if err != nil || !added {
		t.Fatalf("Add(%s) = %v, %v", id, added, err)
	}
	return seq
}

func texts(t *testing.T, s *Store) []string {
	t.Helper()
	msgs, err := s.Unanswered(context.Background(), chat)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text)
	}
	return out
}

// An answer queues its text and moves the cursor together; the cursor
// never moves back, and an answered message can no longer be edited or
// deleted.
func TestAnswerMovesCursorWithReply(t *testing.T) {
	s, ctx := open(t), context.Background()
	one := add(t, s, "1", "one")
	add(t, s, "2", "two")
	if _, added, err := s.Add(ctx, channel.Message{ChatJID: chat, ID: "1", Text: "again"}, ""); err != nil || added {
		t.Fatalf("a redelivery was stored again: %v, %v", added, err)
	}
	out := outboxOf(s)
	if err := s.Answer(ctx, out, Answer{ReplyTo: chat, Text: "reply", Kind: outbox.KindReply, Chat: chat, UpTo: one}); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, s); len(got) != 1 || got[0] != "two" {
		t.Errorf("unanswered after the answer = %q, want [two]", got)
	}
	var queued int
	s.db.QueryRowContext(ctx, `SELECT count(*) FROM outbox WHERE chat_jid = ? AND text = 'reply'`, chat).Scan(&queued)
	if queued != 1 {
		t.Errorf("reply rows = %d, want 1", queued)
	}
	if err := s.Answer(ctx, out, Answer{Chat: chat, UpTo: one - 1}); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, s); len(got) != 1 {
		t.Errorf("a lower cursor moved it back: unanswered = %q", got)
	}
	if ok, err := s.Edit(ctx, chat, "1", "changed"); err != nil || ok {
		t.Errorf("edit of an answered message = %v, %v", ok, err)
	}
	if ok, err := s.Edit(ctx, chat, "2", "TWO"); err != nil || !ok {
		t.Errorf("edit of an unanswered message = %v, %v", ok, err)
	}
	if err := s.Revoke(ctx, chat, "2"); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, s); len(got) != 0 {
		t.Errorf("unanswered after revoking = %q", got)
	}
}

// A failed answer (no chat to send to) moves no cursor.
func TestAnswerIsAtomic(t *testing.T) {
	s, ctx := open(t), context.Background()
	seq := add(t, s, "1", "one")
	if err := s.Answer(ctx, outboxOf(s), Answer{Text: "lost", Kind: outbox.KindReply, Chat: chat, UpTo: seq}); err == nil {
		t.Fatal("an answer without a chat to send to was accepted")
	}
	if got := texts(t, s); len(got) != 1 {
		t.Errorf("the cursor moved without its reply: unanswered = %q", got)
	}
}

// A run that started before a reset does not save its session back.
func TestSessionResetWins(t *testing.T) {
	s, ctx := open(t), context.Background()
	if _, err := s.SaveSession(ctx, "fam", "s1", time.Now()); err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Second)
	if had, err := s.ResetSession(ctx, "fam"); err != nil || !had {
		t.Fatalf("ResetSession = %v, %v; want it to have had one", had, err)
	}
	if reset, _ := s.ResetSince(ctx, "fam", started); !reset {
		t.Error("ResetSince does not see the reset")
	}
	if saved, err := s.SaveSession(ctx, "fam", "s2", started); err != nil || saved {
		t.Errorf("a run older than the reset saved its session: %v, %v", saved, err)
	}
	if id, _ := s.Session(ctx, "fam"); id != "" {
		t.Errorf("session = %q, want none", id)
	}
	if saved, _ := s.SaveSession(ctx, "fam", "s3", time.Now().Add(time.Second)); !saved {
		t.Error("a run after the reset could not save its session")
	}
}

// A file's marker, a quote's id and a reaction come back as stored; a
// changed reaction replaces the sender's earlier one while it is
// unanswered, and one taken back leaves nothing.
func TestMediaQuotesAndReactions(t *testing.T) {
	s, ctx := open(t), context.Background()
	add(t, s, "m1", "look")
	if err := s.SetMedia(ctx, chat, "m1", "[voice note 0:03, media/m1.ogg] transcript: hi"); err != nil {
		t.Fatal(err)
	}
	react := func(id, sender, emoji string) {
		t.Helper()
		if _, _, err := s.Add(ctx, channel.Message{ChatJID: chat, ID: id, SenderJID: sender, Text: emoji, ReactTo: "m1", Time: time.Now()}, ""); err != nil {
			t.Fatal(err)
		}
	}
	react("r1", "bob", "👍")
	react("r2", "bob", "❤️") // bob changes his mind
	react("r3", "carol", "😂")
	react("r4", "carol", "") // and carol takes hers back
	if _, _, err := s.Add(ctx, channel.Message{ChatJID: chat, ID: "q1", SenderJID: "bob", Text: "yes", QuotedID: "m1", QuotedText: "look", Time: time.Now()}, ""); err != nil {
		t.Fatal(err)
	}
	msgs, err := s.Unanswered(ctx, chat)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.ID+"|"+m.Text+"|"+m.Media+"|"+m.ReactTo+"|"+m.QuotedID)
	}
	want := []string{"m1|look|[voice note 0:03, media/m1.ogg] transcript: hi||", "r2|❤️||m1|", "q1|yes|||m1"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if id, name, text, ok, err := s.Lookup(ctx, chat, "m1"); err != nil || !ok || id != "alice" || name != "alice" || text != "[voice note 0:03, media/m1.ogg] transcript: hi look" {
		t.Errorf("Lookup(m1) = %q %q %q %v %v", id, name, text, ok, err)
	}
	if _, _, _, ok, err := s.Lookup(ctx, chat, "nope"); err != nil || ok {
		t.Errorf("Lookup of an unknown id = %v, %v", ok, err)
	}
}

// A message records its chat by id and time only: a group a channel
// reported stays a group with its name (the snapshot lists only groups).
func TestChatStaysAGroup(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	now := time.Now()
	if err := s.RecordChat(ctx, channel.Chat{JID: "g@g.us", Name: "Family", IsGroup: true, Time: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordChat(ctx, channel.Chat{JID: "g@g.us", Time: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	chats, err := s.ListChats(ctx)
	if err != nil || len(chats) != 1 || !chats[0].IsGroup || chats[0].Name != "Family" {
		t.Fatalf("chats %+v (%v), want Family still a group", chats, err)
	}
}

// UnansweredIn gives each chat what Unanswered gives it, in one statement:
// a chat with an answered cursor only what came after, one never answered
// all of it, the assistant's own messages and unasked chats never.
func TestUnansweredIn(t *testing.T) {
	s, ctx := open(t), context.Background()
	const other, quiet, unasked = "other@g.us", "quiet@g.us", "unasked@g.us"
	one := add(t, s, "1", "one")
	add(t, s, "2", "two")
	for i, m := range []channel.Message{
		{ChatJID: other, ID: "o1", SenderJID: "bob", Text: "hi"},
		{ChatJID: other, ID: "o2", Text: "my own answer", IsBot: true},
		{ChatJID: quiet, ID: "q1", SenderJID: "carol", Text: "answered"},
		{ChatJID: unasked, ID: "u1", SenderJID: "dave", Text: "not asked for"},
	} {
		m.Time = time.Now().Add(time.Duration(i) * time.Second)
		if _, _, err := s.Add(ctx, m, ""); err != nil {
			t.Fatal(err)
		}
	}
	out := outboxOf(s)
	for chat, upTo := range map[string]int64{chat: one, quiet: 1 << 40} {
		if err := s.Answer(ctx, out, Answer{Chat: chat, UpTo: upTo}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.UnansweredIn(ctx, []string{chat, other, quiet})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[quiet]) != 0 || len(got[other]) != 1 || got[other][0].Text != "hi" {
		t.Errorf("UnansweredIn = %+v", got)
	}
	for _, c := range []string{chat, other} {
		alone, err := s.Unanswered(ctx, c)
		if err != nil || len(alone) != len(got[c]) || alone[0] != got[c][0] {
			t.Errorf("%s: Unanswered %+v (%v), UnansweredIn %+v", c, alone, err, got[c])
		}
	}
}
