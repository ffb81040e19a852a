package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// searchVerdict waits for the agent's reply "search: VERDICT" in chat and
// returns the verdict.
func searchVerdict(t *testing.T, in *e2e.Install, chat string) protocol.Verdict {
	t.Helper()
	s := in.WaitNext(chat, func(s string) bool { return strings.HasPrefix(s, "search: ") })
	var v protocol.Verdict
	if err := json.Unmarshal([]byte(strings.TrimPrefix(s.Text, "search: ")), &v); err != nil {
		t.Fatalf("the agent's reply %q: %v", s.Text, err)
	}
	return v
}

// TestSearchHistory: 2,000 messages posted to a group over the local
// channel; the group's agent asks for a word of message 17 with a
// search_history request file and gets that message (id, sender, time)
// and nothing of another group's chat, which holds the same word. Naming
// that other chat is refused, audited and alerted; main may name it.
func TestSearchHistory(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family") // requires the trigger: the burst only stores
	in.AddGroup("local:work", "work")
	in.Start()

	ids := make([]string, 2000)
	var posted []time.Time
	for i := range ids {
		posted = append(posted, time.Now())
		ids[i] = in.Post("local:family", "Ann", fmt.Sprintf("message %d: the plumber's name is word%dx", i+1, i+1))
	}
	workID := in.Post("local:work", "Bob", "at work word17x is a secret")

	ask := in.Post("local:family", "Ann", "@Andy search word17x")
	v := searchVerdict(t, in, "local:family")
	// The question holds the word too, and is newest.
	if v.Status != "ok" || v.Messages == nil || len(*v.Messages) != 2 || (*v.Messages)[0].ID != ask {
		t.Fatalf("verdict %+v, want the question and message 17", v)
	}
	m := (*v.Messages)[1]
	at, err := time.Parse(time.RFC3339Nano, m.Time)
	if m.ID != ids[16] || m.ChatJID != "local:family" || m.Sender != "Ann@local" || m.SenderName != "Ann" ||
		!strings.Contains(m.Text, "word17x") || err != nil || at.Before(posted[16].Add(-time.Second)) || at.After(posted[17].Add(time.Second)) {
		t.Errorf("found %+v (time %v), want message 17 (%s) from Ann posted at %v", m, err, ids[16], posted[16])
	}

	// A confined group naming another chat: refused, audited, alerted.
	in.Post("local:family", "Ann", "@Andy search-in local:work word17x")
	v = searchVerdict(t, in, "local:family")
	if v.Status != "refused" || !strings.Contains(v.Reason, "may only search its own chat") || v.Messages != nil {
		t.Errorf("cross-group search: %+v", v)
	}
	in.WaitFor("local:main", func(s string) bool { return strings.Contains(s, "may only search its own chat") })
	var audit []auditEntry
	if err := json.Unmarshal([]byte(in.CLI("violations", "--group", "family", "--json")), &audit); err != nil {
		t.Fatal(err)
	}
	if len(audit) != 1 || audit[0].Target != "local:work" || !strings.Contains(audit[0].Detail, "may only search its own chat") {
		t.Errorf("audit of family: %+v", audit)
	}

	// Main may search another registered chat; its answers are searchable too.
	in.Post("local:main", "Owner", "search-in local:work word17x")
	v = searchVerdict(t, in, "local:main")
	if v.Status != "ok" || v.Messages == nil || len(*v.Messages) != 1 || (*v.Messages)[0].ID != workID { // only work's, not family's
		t.Errorf("main searching work: %+v", v)
	}
	in.Post("local:main", "Owner", "echo the roofer is Mia")
	in.WaitFor("local:main", e2e.Equals("echo: the roofer is Mia"))
	in.Post("local:main", "Owner", "search roofer limit=5")
	v = searchVerdict(t, in, "local:main")
	if v.Status != "ok" || v.Messages == nil || len(*v.Messages) != 3 || (*v.Messages)[0].Sender != "Owner@local" ||
		(*v.Messages)[1].Sender != messages.AssistantSender || (*v.Messages)[1].Text != "echo: the roofer is Mia" {
		t.Errorf("main's own search, newest first (the question, the answer, the order): %+v", v.Messages)
	}
}

// A query with control characters — a NUL (which ended the index's reading
// of the query: an FTS5 syntax error, retried five times as a failing
// database, and never answered), \x01, an escape sequence — or a lone
// quote is answered at once, every time: the characters part words like
// spaces, and a query of nothing but them is refused with what to ask.
func TestSearchWithControlCharactersIsAnswered(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	plumber := in.Post("local:main", "Ann", "the plumber is Jonas")
	for _, c := range []struct {
		query  string
		found  bool   // the plumber's message (and the question, which holds the word too)
		reason string // refused with this
	}{
		{query: "jonas\x00", found: true},
		{query: "\x01jonas", found: true},
		{query: "\x1bjonas", found: true},
		{query: "jonas\x1b[31m"}, // "[31m" is a word of the question alone
		{query: `jonas "`, found: true},
		{query: "\x00", reason: "give one or more words"},
		{query: `"`, reason: "give one or more words"},
		{query: "\x00\x01\x1b", reason: "give one or more words"},
	} {
		in.Post("local:main", "Ann", "search-quoted "+strconv.Quote(c.query))
		v := searchVerdict(t, in, "local:main")
		switch {
		case c.reason != "":
			if v.Status != "refused" || !strings.Contains(v.Reason, c.reason) {
				t.Errorf("query %q: %+v, want refused: %s", c.query, v, c.reason)
			}
		case v.Status != "ok" || v.Messages == nil:
			t.Errorf("query %q: %+v, want an answer", c.query, v)
		case c.found && (len(*v.Messages) == 0 || (*v.Messages)[len(*v.Messages)-1].ID != plumber):
			t.Errorf("query %q found %+v, want the plumber's message", c.query, *v.Messages)
		}
	}
	if strings.Contains(p.Out.String(), "attempt 1 of") {
		t.Errorf("a search was retried as a failure:\n%s", p.Out.String())
	}
}

// TestSearchAfterKill9: the daemon is killed with SIGKILL in the middle of
// a burst; after a restart every stored message is found exactly once,
// every message the channel acknowledged among them, and the index agrees
// with the messages table.
func TestSearchAfterKill9(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:family", "family")
	p := in.Start()

	const n = 600
	acked := make([]bool, n)
	var ackedN atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			_, err := in.Local.Post(context.Background(), local.Message{ChatJID: "local:family", Sender: "ann@local",
				SenderName: "Ann", Text: fmt.Sprintf("burst kilo%dz", i)})
			if err == nil {
				acked[i] = true
				ackedN.Add(1)
			}
		}
	}()
	for ackedN.Load() < n/3 {
		time.Sleep(2 * time.Millisecond)
	}
	p.Kill9()
	<-done
	in.Start()

	db, err := store.OpenFile(in.Layout().DB())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := messages.New(db)
	// Whatever the kill left pending is folded in (the restarted daemon
	// may be doing it too); then the index must match the messages
	// exactly: a message indexed twice or not at all fails the check.
	if err := s.Index(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(context.Background(), `INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Errorf("the index does not match the messages after kill -9: %v", err)
	}
	stored := 0
	for i := range n {
		q, _ := protocol.Request{Query: fmt.Sprintf("kilo%dz", i)}.Search(time.UTC)
		found, err := s.Search(context.Background(), "local:family", q)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) > 1 || (acked[i] && len(found) != 1) {
			t.Errorf("message %d (acknowledged %v) found %d times", i, acked[i], len(found))
		}
		stored += len(found)
	}
	var rows int
	if err := db.QueryRowContext(context.Background(), `SELECT count(*) FROM messages WHERE chat_jid = 'local:family'`).Scan(&rows); err != nil || rows != stored {
		t.Errorf("%d messages stored (%v), %d found by search", rows, err, stored)
	}
	t.Logf("killed after %d acknowledged; %d of %d stored, each found once", n/3, stored, n)
}
