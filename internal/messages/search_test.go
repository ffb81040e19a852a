package messages

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

func search(t *testing.T, s *Store, chat, query string, mod ...func(*protocol.Search)) []string {
	t.Helper()
	q, err := protocol.Request{Query: query}.Search(time.UTC)
	if err != nil {
		t.Fatalf("query %q: %v", query, err)
	}
	for _, m := range mod {
		m(&q)
	}
	found, err := s.Search(context.Background(), chat, q)
	if err != nil {
		t.Fatalf("search %q: %v", query, err)
	}
	var ids []string
	for _, f := range found {
		ids = append(ids, f.ID)
	}
	return ids
}

// integrity asks FTS5 whether its index matches the messages table.
func integrity(t *testing.T, s *Store) {
	t.Helper()
	if err := s.Index(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(context.Background(), `INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Errorf("the index does not match the messages: %v", err)
	}
}

func TestSearch(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	day := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	put := func(chatJID, id, text string, at time.Time) {
		t.Helper()
		if _, _, err := s.Add(ctx, channel.Message{ChatJID: chatJID, ID: id, SenderJID: "bob", SenderName: "Bob", Text: text, Time: at}, ""); err != nil {
			t.Fatal(err)
		}
	}
	put(chat, "a", "The plumber is called Jonas", day)
	put(chat, "b", "ask the PLUMBER about the boiler", day.Add(24*time.Hour))
	put(chat, "c", `plumber OR "electrician" NEAR(x) *`, day.Add(48*time.Hour))
	put("other@g.us", "d", "their plumber is someone else", day)
	put(chat, "e", "Café crème", day)
	// A redelivery is not indexed again.
	put(chat, "a", "The plumber is called Jonas", day)

	if got := search(t, s, chat, "plumber"); !slices.Equal(got, []string{"c", "b", "a"}) {
		t.Errorf("plumber: %v, want newest first c b a and nothing of the other chat", got)
	}
	if got := search(t, s, chat, "plumber jonas"); !slices.Equal(got, []string{"a"}) {
		t.Errorf("every word must occur: %v", got)
	}
	// Operators and quotes are only text.
	if got := search(t, s, chat, `plumber OR electrician`); !slices.Equal(got, []string{"c"}) {
		t.Errorf("OR taken as a word: %v, want c", got)
	}
	if got := search(t, s, chat, `"electrician" NEAR(x)`); !slices.Equal(got, []string{"c"}) {
		t.Errorf("quotes and NEAR taken literally: %v", got)
	}
	if got := search(t, s, chat, `jon*`); len(got) != 0 {
		t.Errorf("* is no prefix operator: %v", got)
	}
	if got := search(t, s, chat, "cafe creme"); !slices.Equal(got, []string{"e"}) {
		t.Errorf("diacritics: %v", got)
	}
	since := func(q *protocol.Search) { q.Since = day.Add(time.Hour) }
	until := func(q *protocol.Search) { q.Until = day.Add(25 * time.Hour) }
	if got := search(t, s, chat, "plumber", since, until); !slices.Equal(got, []string{"b"}) {
		t.Errorf("since/until: %v, want b", got)
	}
	if got := search(t, s, chat, "plumber", func(q *protocol.Search) { q.Limit = 2 }); !slices.Equal(got, []string{"c", "b"}) {
		t.Errorf("limit 2: %v", got)
	}

	// Edits and deletions move the index with them.
	if ok, err := s.Edit(ctx, chat, "b", "ask the electrician"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got := search(t, s, chat, "boiler"); len(got) != 0 {
		t.Errorf("an edited message is still found by its old words: %v", got)
	}
	if err := s.Revoke(ctx, chat, "a"); err != nil {
		t.Fatal(err)
	}
	if got := search(t, s, chat, "jonas"); len(got) != 0 {
		t.Errorf("a deleted message is still found: %v", got)
	}
	if err := s.SetMedia(ctx, chat, "e", "[voice note 0:04, media/e.ogg] transcript: the roofer comes Tuesday"); err != nil {
		t.Fatal(err)
	}
	if got := search(t, s, chat, "roofer"); !slices.Equal(got, []string{"e"}) {
		t.Errorf("a voice note's transcript: %v", got)
	}
	integrity(t, s)
}

// The assistant's answers are found as it gave them (RecordAnswerTx, when
// queued); a channel's echo of them is not found a second time.
func TestSearchFindsAnswers(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	out := outboxOf(s)
	if err := s.Answer(ctx, out, Answer{ReplyTo: chat, Text: "The plumber's number is 0170 555", Kind: outbox.KindReply}); err != nil {
		t.Fatal(err)
	}
	if err := s.Answer(ctx, out, Answer{ReplyTo: chat, Text: "Fresh start: plumber", Kind: outbox.KindNotice}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Add(ctx, channel.Message{ChatJID: chat, ID: "wa-echo", SenderJID: "me", Text: "Andy: The plumber's number is 0170 555",
		Time: time.Now(), FromMe: true, IsBot: true}, ""); err != nil {
		t.Fatal(err)
	}
	q, _ := protocol.Request{Query: "plumber"}.Search(time.UTC)
	found, err := s.Search(ctx, chat, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Sender != AssistantSender || found[0].Text != "The plumber's number is 0170 555" {
		t.Fatalf("found %+v, want only the answer, once, from %q", found, AssistantSender)
	}
	// Never part of a prompt.
	if got := texts(t, s); len(got) != 0 {
		t.Errorf("an answer came back as a message to answer: %v", got)
	}
}

// A message edited or deleted before it is indexed
// leaves the index right: nothing of its old words, nothing twice.
func TestIndexQueue(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	add(t, s, "m1", "the tiler comes Monday")
	add(t, s, "m2", "the tiler is expensive")
	if ok, err := s.Edit(ctx, chat, "m1", "the painter comes Monday"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := s.Revoke(ctx, chat, "m2"); err != nil {
		t.Fatal(err)
	}
	var pending int
	s.db.QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE seq > (SELECT seq FROM messages_fts_mark)`).Scan(&pending)
	if pending != 1 {
		t.Errorf("%d messages not indexed yet, want m1 alone", pending)
	}
	integrity(t, s) // indexes the rest, then checks
	if got := search(t, s, chat, "tiler"); len(got) != 0 {
		t.Errorf("tiler: %v, want nothing", got)
	}
	if got := search(t, s, chat, "painter"); !slices.Equal(got, []string{"m1"}) {
		t.Errorf("painter: %v", got)
	}
	// Indexing again changes nothing.
	if err := s.Index(ctx); err != nil {
		t.Fatal(err)
	}
	integrity(t, s)
}

// A query the full-text index cannot read (a NUL ends FTS5's reading of a
// quoted word) is the query's fault: ErrBadQuery, told by SQLite's error
// code, so that the IPC watcher answers it instead of retrying it as a
// failing database.
func TestSearchBadQuery(t *testing.T) {
	s := open(t)
	_, err := s.Search(context.Background(), chat, protocol.Search{Words: []string{"plumb\x00er"}, Limit: 5})
	if !errors.Is(err, ErrBadQuery) {
		t.Fatalf("search with a NUL: %v, want ErrBadQuery", err)
	}
	if _, err := s.Search(context.Background(), chat, protocol.Search{Words: []string{"plumber"}, Limit: 5}); err != nil {
		t.Fatalf("a plain search after it: %v", err)
	}
}
