package router

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/media"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

const (
	mainJID = "local:main"
	famJID  = "120363000000000002@g.us"
	alice   = "49170@s.whatsapp.net"
	mallory = "49666@s.whatsapp.net"
)

// env is a router over a real SQLite file, with main and family
// registered (family needs "@Andy" and only alice may call it), and mocks
// for what it drives: the queue's runs are counted; the outbox, never
// run, keeps what was queued.
type env struct {
	t        *testing.T
	r        *Router
	db       *store.DB
	cfg      *config.Config
	msgs     *messages.Store
	running  map[string]bool
	enqueued []string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg := &config.Config{AssistantName: "Andy", DataDir: filepath.Join(dir, "data"), GroupsDir: filepath.Join(dir, "groups"),
		Agent: config.Agent{NewSessionCommand: "/new"}}
	reg := groups.New(db, cfg.GroupsDir)
	ctx := context.Background()
	for _, g := range []groups.Group{
		{JID: mainJID, Name: "Main", Folder: "main", IsMain: true},
		{JID: famJID, Name: "Family", Folder: "family", Trigger: "@Andy", RequiresTrigger: true,
			Security: &security.Policy{Senders: []string{"+49170"}}},
	} {
		if err := reg.Add(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{t: t, db: db, cfg: cfg, msgs: messages.New(db), running: map[string]bool{}}
	e.r = &Router{
		Messages: e.msgs, Groups: reg, Config: func() *config.Config { return cfg }, Log: zerolog.Nop(),
		Queue: &mock.Queue{
			EnqueueMessagesFn: func(folder string) { e.enqueued = append(e.enqueued, folder) },
			RunningFn:         func(folder string) bool { return e.running[folder] },
		},
		Outbox: outbox.New(db, nil, reg, zerolog.Nop()),
	}
	e.r.Media = &media.Inbound{Config: e.r.Config, Messages: e.msgs, Log: zerolog.Nop()}
	return e
}

// post delivers a message from sender to chat.
func (e *env) post(chat, sender, id, text string) {
	e.t.Helper()
	m := channel.Message{ChatJID: chat, ID: id, SenderJID: sender, SenderName: "Alice", Text: text, Time: time.Now()}
	if err := e.r.OnMessage(context.Background(), m); err != nil {
		e.t.Fatal(err)
	}
}

// unanswered returns the texts of chat's unanswered messages.
func (e *env) unanswered(chat string) []string {
	e.t.Helper()
	msgs, err := e.msgs.Unanswered(context.Background(), chat)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, m.Text)
	}
	return out
}

// queued returns the texts the outbox holds for chat.
func (e *env) queued(chat string) []string {
	e.t.Helper()
	rows, err := e.db.QueryContext(context.Background(), `SELECT text FROM outbox WHERE chat_jid = ? ORDER BY id`, chat)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		rows.Scan(&s)
		out = append(out, s)
	}
	return out
}
