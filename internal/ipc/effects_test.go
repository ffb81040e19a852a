package ipc

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/outboxtest"
)

// The watcher's own effects, on the daemon's real parts over one database:
// a message and a reaction queued in the outbox (the reaction naming its
// message's author), a group registered with the default trigger (the same
// file again is no error), a forged file audited, and the main group's
// available_groups.json rewritten.
func TestDaemonEffects(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	msgs := messages.New(h.db)
	out := outbox.New(h.db, outboxtest.NewRecorder(), h.groups, zerolog.Nop())
	h.w.cfg.Outbox, h.w.cfg.Messages = out, msgs
	h.w.cfg.Alerts = alerts.NewReporter(h.db, h.layout.GroupsDir, out, h.groups, time.Minute, nil, zerolog.Nop())
	h.w.cfg.Snapshots = NewSnapshots(h.layout, h.db, msgs, h.groups, zerolog.Nop())
	h.w.cfg.DefaultTrigger = func() string { return "@Andy" }
	h.w.fx = daemonEffects{&h.w.cfg}
	h.start(t)

	h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "hello"))
	waitRow(t, h.db, `SELECT 1 FROM outbox WHERE chat_jid = 'family@g.us' AND text = 'hello' AND kind = ?`, outbox.KindIPC)

	if _, _, err := msgs.Add(ctx, channel.Message{ID: "M1", ChatJID: "family@g.us", SenderJID: "ann@s.whatsapp.net",
		SenderName: "Ann", Text: "dinner?", Time: time.Now()}, ""); err != nil {
		t.Fatal(err)
	}
	h.drop(t, "family", layout.MessagesDir, map[string]any{"type": protocol.TypeReaction, "chatJid": "family@g.us",
		"messageId": "M1", "emoji": "👍", "token": h.token["family"]})
	waitRow(t, h.db, `SELECT 1 FROM outbox WHERE react_to = 'M1' AND react_sender = 'ann@s.whatsapp.net' AND text = '👍'`)

	register := map[string]any{"type": protocol.TypeRegisterGroup, "jid": "new@g.us", "name": "New", "folder": "new", "token": h.token["main"]}
	h.drop(t, "main", layout.TasksDir, register)
	h.drop(t, "main", layout.TasksDir, register)
	waitRow(t, h.db, `SELECT 1 FROM ipc_journal WHERE type = ? AND status = ? GROUP BY type HAVING count(*) = 2`, protocol.TypeRegisterGroup, statusSent)
	if g, err := h.groups.ByJID(ctx, "new@g.us"); err != nil || g.Folder != "new" || g.Trigger != "@Andy" {
		t.Errorf("registered %+v, %v; want folder new with trigger @Andy", g, err)
	}

	h.drop(t, "work", layout.MessagesDir, map[string]any{"type": protocol.TypeMessage, "chatJid": "work@g.us", "text": "x", "token": "forged"})
	waitRow(t, h.db, `SELECT 1 FROM violations WHERE grp = 'work' AND kind = 'ipc' AND action = 'blocked'`)

	h.drop(t, "main", layout.TasksDir, map[string]any{"type": protocol.TypeRefreshGroups, "token": h.token["main"]})
	deadline := time.Now().Add(10 * time.Second)
	for _, err := os.Stat(h.layout.IPC("main").GroupsSnapshot()); err != nil; _, err = os.Stat(h.layout.IPC("main").GroupsSnapshot()) {
		if time.Now().After(deadline) {
			t.Fatalf("refresh_groups wrote no available_groups.json: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRow waits up to 10 s for query to return a row.
func waitRow(t *testing.T, db *store.DB, query string, args ...any) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var one int
		err := db.QueryRowContext(context.Background(), query, args...).Scan(&one)
		if err == nil {
			return
		}
		if err != sql.ErrNoRows || time.Now().After(deadline) {
			t.Fatalf("no row for %s %v within 10s: %v", query, args, err)
		}
	}
}
