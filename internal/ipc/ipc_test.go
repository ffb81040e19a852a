package ipc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/groupfstest"
)

// registerTestGroups registers testGroups in the registry of db, whose
// folders live in groupsDir.
func registerTestGroups(t testing.TB, db *store.DB, groupsDir string) *groups.Registry {
	reg := groups.New(db, groupsDir)
	for _, g := range testGroups {
		if err := reg.Add(context.Background(), g); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// event is one call the watcher made on the daemon.
type event struct {
	kind  string // send | register | refresh | violation
	key   string
	from  string
	chat  string
	text  string
	group newGroup
	file  *channel.Attachment
	v     security.Violation
	alert bool
}

// fakeEffects reports every effect on a channel once its journal
// transaction has committed, as the daemon's outbox would see it.
type fakeEffects struct {
	events  chan event
	groups  *groups.Registry
	pending []event // effects of the transaction under way
}

func (a *fakeEffects) sendMessageTx(_ context.Context, _ *store.Tx, id int64, from, chat, text string, file *channel.Attachment) error {
	a.pending = append(a.pending, event{kind: "send", key: strconv.FormatInt(id, 10), from: from, chat: chat, text: text, file: file})
	return nil
}

func (a *fakeEffects) reactTx(_ context.Context, _ *store.Tx, id int64, from, chat, messageID, emoji string) error {
	a.pending = append(a.pending, event{kind: "react", key: strconv.FormatInt(id, 10), from: from, chat: chat, text: messageID + " " + emoji})
	return nil
}

func (a *fakeEffects) registerGroupTx(ctx context.Context, tx *store.Tx, id int64, g newGroup) error {
	if err := a.groups.AddTx(ctx, tx, groups.Group{JID: g.JID, Name: g.Name, Folder: g.Folder}); err != nil {
		return err
	}
	a.pending = append(a.pending, event{kind: "register", key: strconv.FormatInt(id, 10), group: g})
	return nil
}

func (a *fakeEffects) refusedTx(_ context.Context, _ *store.Tx, id int64, v security.Violation, alert bool) error {
	a.pending = append(a.pending, event{kind: "violation", key: strconv.FormatInt(id, 10), v: v, alert: alert})
	return nil
}

func (a *fakeEffects) noticeTx(_ context.Context, _ *store.Tx, _, text string) error {
	a.pending = append(a.pending, event{kind: "notice", text: text})
	return nil
}

func (a *fakeEffects) committed(context.Context) {
	for _, e := range a.pending {
		a.events <- e
	}
	a.pending = nil
}

func (a *fakeEffects) refreshGroups(context.Context) error {
	a.events <- event{kind: "refresh"}
	return nil
}

type harness struct {
	root    string // <dataDir>/ipc
	layout  layout.Layout
	db      *store.DB
	tokens  *Tokens
	sched   *scheduler.Scheduler
	groups  *groups.Registry
	effects *fakeEffects
	w       *Watcher
	token   map[string]string // folder → live token
	links   *groupfstest.Reporter
}

var testGroups = []groups.Group{
	{JID: "main@g.us", Folder: "main", IsMain: true},
	{JID: "family@g.us", Folder: "family"},
	{JID: "work@g.us", Folder: "work"},
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	dataDir := t.TempDir()
	db, err := store.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	tokens, err := OpenTokens(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	l := layout.New(dataDir, t.TempDir())
	root := l.IPCRoot()
	reg := registerTestGroups(t, db, l.GroupsDir)
	h := &harness{root: root, layout: l, db: db, tokens: tokens, groups: reg, token: map[string]string{},
		effects: &fakeEffects{events: make(chan event, 100000), groups: reg}, links: &groupfstest.Reporter{}}
	h.sched = scheduler.New(db, time.UTC, nil, nil, zerolog.Nop())
	h.w, err = NewWatcher(Config{Layout: l, DB: db, Tokens: tokens, Groups: reg, Tasks: h.sched,
		Reporter: h.links, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h.w.fx = h.effects
	for _, g := range testGroups {
		if h.token[g.Folder], err = tokens.Issue(ctx, g.Folder); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) start(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

var seq int

// drop writes an IPC file the way the MCP server does: .json.tmp, then rename.
func (h *harness) drop(t testing.TB, folder, sub string, v any) string {
	t.Helper()
	data, ok := v.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	seq++
	name := fmt.Sprintf("%d-%04d.json", time.Now().UnixNano(), seq)
	dir := filepath.Join(h.root, folder, sub)
	if err := os.WriteFile(filepath.Join(dir, name+".tmp"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

func (h *harness) msg(folder, chat, text string) map[string]any {
	return map[string]any{"type": protocol.TypeMessage, "chatJid": chat, "text": text, "token": h.token[folder]}
}

// next waits for the watcher's next call, with a deadline.
func (h *harness) next(t testing.TB) event {
	t.Helper()
	select {
	case e := <-h.effects.events:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no action from the watcher within 10s")
		return event{}
	}
}

func (h *harness) expectSend(t testing.TB, from, chat, text string) event {
	t.Helper()
	e := h.next(t)
	if e.kind != "send" || e.from != from || e.chat != chat || e.text != text {
		t.Fatalf("got %+v; want send %q from %s to %s", e, text, from, chat)
	}
	return e
}

// expectRefused checks a refusal: reported (alerted or not), quarantined
// with its reason, and gone from the group's directory.
func (h *harness) expectRefused(t testing.TB, path string, alert bool, group, reason string) {
	t.Helper()
	e := h.next(t)
	if e.kind != "violation" {
		t.Fatalf("got %+v; want a violation", e)
	}
	if e.alert != alert || e.v.Group != group || e.v.Kind != "ipc" || e.v.Action != "blocked" || !strings.Contains(e.v.Detail, reason) {
		t.Fatalf("violation %+v alert=%v; want group %s alert=%v detail containing %q", e.v, e.alert, group, alert, reason)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("%s still in place (%v)", path, err)
	}
	matches, _ := filepath.Glob(filepath.Join(h.root, layout.ErrorsDir, "*"+filepath.Base(path)))
	if len(matches) != 1 {
		t.Fatalf("quarantine holds %v for %s", matches, filepath.Base(path))
	}
	why, err := os.ReadFile(matches[0] + ".reason")
	if err != nil || !strings.Contains(string(why), reason) {
		t.Fatalf("reason file: %q %v; want it to contain %q", why, err, reason)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
