package telegram_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

const token = "99:AAunit-unit_unit-unit_unit-unit_uni"

// newChannel is a channel polling bot; opts adds to what it is given.
func newChannel(t *testing.T, bot *mocktelegram.Server, db *store.DB, opts telegram.Options) *telegram.Channel {
	t.Helper()
	opts.Token, opts.APIURL, opts.AssistantName, opts.DB, opts.PollTimeout = token, bot.URL, "Andy", db, time.Second
	opts.Trigger = func(_ context.Context, jid string) string { return "@Andy" }
	c, err := telegram.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sink records what the channel delivers; failures makes the first
// OnMessage calls fail, as a database that cannot write would.
type sink struct {
	mu       sync.Mutex
	msgs     []channel.Message
	chats    []channel.Chat // what OnChat was told
	failures int
	got      chan struct{}
}

func (s *sink) OnMessage(_ context.Context, m channel.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures > 0 {
		s.failures--
		return errors.New("disk full")
	}
	s.msgs = append(s.msgs, m)
	s.got <- struct{}{}
	return nil
}

func (s *sink) OnChat(_ context.Context, c channel.Chat) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chats = append(s.chats, c)
	return nil
}

func (s *sink) next(t *testing.T) channel.Message {
	t.Helper()
	select {
	case <-s.got:
	case <-time.After(30 * time.Second):
		t.Fatal("no message delivered")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msgs[len(s.msgs)-1]
}

// Inbound: a message that fails to store is not confirmed and comes
// again; a group message naming the bot or replying to it gets the
// group's trigger; a reply names the quoted message; a document is
// fetched through getFile; a reaction names its message; the chats seen
// are listed.
func TestInbound(t *testing.T) {
	bot := mocktelegram.Start(t, token)
	db, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := newChannel(t, bot, db, telegram.Options{})
	s := &sink{failures: 1, got: make(chan struct{}, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, s) }()
	defer func() { cancel(); <-done }()

	group := mocktelegram.Group(-1001, "Family")
	alice := mocktelegram.User(5, "Alice")
	first := bot.Message(group, alice, "@"+mocktelegram.BotUsername+" hello", nil)
	id := bot.Push(map[string]any{"message": first})
	m := s.next(t)
	if m.ChatJID != "tg:-1001" || m.SenderJID != "tg:5" || m.SenderName != "Alice" || m.Text != "@Andy hello" {
		t.Errorf("a mention of the bot: %+v", m)
	}
	if offs := bot.Offsets(); len(offs) < 2 {
		t.Errorf("after a failed store the update must be asked for again without confirming it: offsets %v", offs)
	} else if offs[len(offs)-1] > id {
		// The last poll is past it only after the successful store; the
		// one after the failure was not.
		for _, o := range offs[:len(offs)-1] {
			if o > id {
				t.Errorf("update %d confirmed (offset %d) before it was stored: %v", id, o, offs)
			}
		}
	}

	botMsg := map[string]any{"message_id": 1, "date": time.Now().Unix(), "chat": group, "text": "earlier answer",
		"from": map[string]any{"id": mocktelegram.BotID, "is_bot": true, "first_name": "Nano", "username": mocktelegram.BotUsername}}
	bot.Push(map[string]any{"message": bot.Message(group, alice, "and then?", map[string]any{"reply_to_message": botMsg})})
	if m := s.next(t); m.Text != "@Andy and then?" || m.QuotedID != "1" || m.QuotedSender != "Nano" || m.QuotedText != "earlier answer" {
		t.Errorf("a reply to the bot: %+v", m)
	}

	pdf := []byte("%PDF-1.4 tiny")
	bot.Push(map[string]any{"message": bot.Message(group, alice, "", map[string]any{"caption": "the report",
		"document": map[string]any{"file_id": bot.AddFile(pdf), "file_unique_id": "d", "file_name": "r.pdf", "mime_type": "application/pdf", "file_size": len(pdf)}})})
	m = s.next(t)
	if m.Text != "the report" || m.Media == nil || m.Media.Kind != channel.MediaDocument || m.Media.Name != "r.pdf" {
		t.Fatalf("a document: %+v", m)
	}
	if data, err := m.Media.Fetch(ctx); err != nil || string(data) != string(pdf) {
		t.Errorf("the document's bytes: %q %v", data, err)
	}

	bot.Push(map[string]any{"message_reaction": mocktelegram.Reaction(group, alice, first["message_id"].(int), "👍")})
	if m := s.next(t); m.ReactTo == "" || m.Text != "👍" || m.SenderJID != "tg:5" {
		t.Errorf("a reaction: %+v", m)
	}

	private := mocktelegram.Private(8, "Bob")
	bot.Push(map[string]any{"message": bot.Message(private, mocktelegram.User(8, "Bob"), "/groups", nil)})
	if m := s.next(t); m.ChatJID != "tg:8" || !m.FromMe || m.Text != "/groups" {
		t.Errorf("a private chat's user speaks for the owner there: %+v", m)
	}
	// In a group, only the owner (who sent the setup code) speaks for the owner.
	bot.Push(map[string]any{"message": bot.Message(group, alice, "not yet", nil)})
	if m := s.next(t); m.FromMe {
		t.Errorf("a group member counts as the owner before setup named one: %+v", m)
	}
	if err := telegram.SetOwner(ctx, db, 5); err != nil {
		t.Fatal(err)
	}
	bot.Push(map[string]any{"message": bot.Message(group, alice, "/groups", nil)})
	if m := s.next(t); !m.FromMe {
		t.Errorf("the owner's message in a group: %+v", m)
	}
	chats, err := telegram.ListChats(ctx, db)
	if err != nil || len(chats) != 2 {
		t.Fatalf("chats: %+v %v", chats, err)
	}
	// The sink's OnMessage records each message's chat: OnChat came only
	// for what that does not tell — once per chat here, its name and kind
	// (seven messages, a redelivery and a reaction among them).
	s.mu.Lock()
	told := s.chats
	s.mu.Unlock()
	if len(told) != 2 || told[0] != (channel.Chat{JID: "tg:-1001", Name: "Family", IsGroup: true, Time: told[0].Time}) || told[1].JID != "tg:8" {
		t.Errorf("OnChat was told %+v; want Family once, then Bob's chat once", told)
	}
	if !c.Connected() || !strings.Contains(c.Status(), "@"+mocktelegram.BotUsername) {
		t.Errorf("status: %s", c.Status())
	}
}

// Outbound: long text in parts of at most 4096, a photo and a document, a
// reaction; flood control (429) is waited out and the message sent; a
// 403 is undeliverable and shown in the status line.
func TestSend(t *testing.T) {
	bot := mocktelegram.Start(t, token)
	c := newChannel(t, bot, nil, telegram.Options{})
	ctx := context.Background()
	chat := "tg:-1002"

	long := strings.Repeat("line of text\n", 500) // 6500 characters
	if err := c.Send(ctx, channel.Outgoing{ID: "1", ChatJID: chat, Text: long}); err != nil {
		t.Fatal(err)
	}
	sent := bot.Requests("sendMessage")
	if len(sent) != 2 || len(sent[0].Params["text"]) > 4096 || sent[0].Params["parse_mode"] != "HTML" {
		t.Fatalf("6500 characters: %d messages", len(sent))
	}

	dir := t.TempDir()
	png, pdf := filepath.Join(dir, "a.png"), filepath.Join(dir, "b.pdf")
	os.WriteFile(png, []byte("png bytes"), 0o600)
	os.WriteFile(pdf, []byte("pdf bytes"), 0o600)
	if err := c.Send(ctx, channel.Outgoing{ID: "2", ChatJID: chat, Text: "*look*", File: &channel.Attachment{Name: "a.png", MIME: "image/png", Path: png}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Send(ctx, channel.Outgoing{ID: "3", ChatJID: chat, File: &channel.Attachment{Name: "b.pdf", MIME: "application/pdf", Path: pdf}}); err != nil {
		t.Fatal(err)
	}
	if p := bot.Requests("sendPhoto"); len(p) != 1 || string(p[0].File) != "png bytes" || p[0].Params["caption"] != "<i>look</i>" {
		t.Errorf("sendPhoto: %+v", p)
	}
	if d := bot.Requests("sendDocument"); len(d) != 1 || d[0].FileName != "b.pdf" || string(d[0].File) != "pdf bytes" {
		t.Errorf("sendDocument: %+v", d)
	}

	if err := c.Send(ctx, channel.Outgoing{ID: "4", ChatJID: chat, ReactTo: "77", Text: "🔥"}); err != nil {
		t.Fatal(err)
	}
	if r := bot.Requests("setMessageReaction"); len(r) != 1 || r[0].Params["message_id"] != "77" || !strings.Contains(r[0].Params["reaction"], "🔥") {
		t.Errorf("setMessageReaction: %+v", r)
	}

	bot.FailNext("sendMessage", mocktelegram.Failure{Code: 429, Description: "Too Many Requests: retry after 1", RetryAfter: 1})
	if err := c.Send(ctx, channel.Outgoing{ID: "5", ChatJID: chat, Text: "after the flood"}); err != nil {
		t.Fatalf("a 429 must be waited out, not returned: %v", err)
	}
	if s := bot.Requests("sendMessage"); s[len(s)-2].Answered != 429 || s[len(s)-1].Params["text"] != "after the flood" {
		t.Errorf("after a 429: %+v", s[len(s)-2:])
	}

	bot.FailNext("sendMessage", mocktelegram.Failure{Code: 403, Description: "Forbidden: bot was blocked by the user"})
	err := c.Send(ctx, channel.Outgoing{ID: "6", ChatJID: chat, Text: "hello?"})
	if !errors.Is(err, channel.ErrUndeliverable) || !strings.Contains(err.Error(), "403") {
		t.Errorf("a 403: %v", err)
	}
	if !strings.Contains(c.Status(), "403") || !strings.Contains(c.Status(), chat) {
		t.Errorf("status after a 403: %s", c.Status())
	}
	if err := c.Send(ctx, channel.Outgoing{ID: "7", ChatJID: "tg:abc", Text: "x"}); !errors.Is(err, channel.ErrUndeliverable) {
		t.Errorf("a malformed JID: %v", err)
	}
}
