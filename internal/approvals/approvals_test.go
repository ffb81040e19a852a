package approvals_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/approvals"
	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

const (
	mainJID  = "120363000000000001@g.us"
	ownerJID = "4915100000001@s.whatsapp.net"
)

func TestOffer(t *testing.T) {
	net := func(target, rule, action string) security.Violation {
		return security.Violation{Group: "family", Kind: security.KindNetwork, Tool: "network", Target: target, Action: action, Rule: rule}
	}
	fs := func(target, rule, action string) security.Violation {
		return security.Violation{Group: "family", Kind: security.KindFilesystem, Tool: "Write", Target: target, Action: action, Rule: rule}
	}
	const domains = "hostSecurity.network.allowedDomains"
	for _, c := range []struct {
		name       string
		v          security.Violation
		key, value string
	}{
		{"a name on 443", net("api.github.com:443", domains, "blocked"), approvals.KeyDomains, "api.github.com"},
		{"a name on 80", net("Example.COM.:80", domains, "blocked"), approvals.KeyDomains, "example.com"},
		{"a name alone", net("example.com", domains, "blocked"), approvals.KeyDomains, "example.com"},
		{"another port is kept", net("example.com:8443", domains, "blocked"), approvals.KeyDomains, "example.com:8443"},
		{"an IP literal", net("169.254.169.254:80", domains, "blocked"), "", ""},
		{"a name that leads to a private address", security.Violation{Group: "family", Kind: security.KindNetwork, Tool: "network",
			Target: "nas.example.com:443", Action: "blocked", Rule: domains,
			Detail: "CONNECT nas.example.com:443 refused by the egress gateway: nas.example.com leads to 192.168.1.5 is private; write the address or its CIDR in network.allowedDomains to allow it"}, "", ""},
		{"an IPv6 literal", net("[::1]:443", domains, "blocked"), "", ""},
		{"denied by deniedDomains", net("evil.com:443", "hostSecurity.network.deniedDomains", "blocked"), "", ""},
		{"only the agent's word", net("example.com:443", domains, "reported"), "", ""},
		{"a write outside", fs("/srv/shared/out.txt", "hostSecurity.allowWrite", "blocked"), approvals.KeyAllowWrite, "/srv/shared/out.txt"},
		{"a read outside the sandbox", fs("/srv/shared", "confinement", "blocked"), approvals.KeyAllowRead, "/srv/shared"},
		{"a relative path", fs("shared/out.txt", "hostSecurity.allowWrite", "blocked"), "", ""},
		{"a path with ..", fs("/srv/../root/.ssh", "confinement", "blocked"), "", ""},
		{"a deny rule", fs("/root/.ssh/id_rsa", "hostSecurity.denyRead", "blocked"), "", ""},
		{"another group's IPC", security.Violation{Group: "family", Kind: security.KindIPC, Target: "other", Action: "blocked", Rule: "ipc"}, "", ""},
	} {
		key, value, ok := approvals.Offer(c.v)
		if key != c.key || value != c.value || ok != (c.key != "") {
			t.Errorf("%s: Offer = %q %q %v, want %q %q", c.name, key, value, ok, c.key, c.value)
		}
	}
}

type env struct {
	db      *store.DB
	dir     string
	reg     *groups.Registry
	cmds    *approvals.Commands
	now     time.Time
	mu      sync.Mutex
	queued  []string
	running map[string]bool
	closed  []string
	cfg     config.Config
	nextID  int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{db: db, dir: dir, now: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), running: map[string]bool{}}
	e.cfg = config.Default()
	e.cfg.DataDir, e.cfg.GroupsDir = filepath.Join(dir, "data"), filepath.Join(dir, "groups")
	e.cfg.HostSecurity.Network = &security.Network{AllowedDomains: []string{"api.anthropic.com"}}
	e.reg = groups.New(db, e.cfg.GroupsDir)
	ctx := context.Background()
	for _, g := range []groups.Group{
		{JID: mainJID, Folder: "main", IsMain: true},
		{JID: "family@g.us", Folder: "family", Trigger: "@Andy", RequiresTrigger: true},
		{JID: "work@g.us", Folder: "work", Trigger: "@Andy", RequiresTrigger: true},
	} {
		if err := e.reg.Add(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	main := &mock.MainChat{MainChatFn: func(context.Context) (string, string, bool) { return "main", mainJID, true }}
	out := outbox.New(db, nil, nil, zerolog.Nop())
	rep := alerts.NewReporter(db, e.cfg.GroupsDir, out, main, 0, e.clock, zerolog.Nop())
	e.cmds = &approvals.Commands{
		DB: db, Groups: e.reg, Config: func() *config.Config { return &e.cfg }, Audit: rep, Outbox: out, Now: e.clock,
		Queue: &mock.Queue{
			EnqueueMessagesFn: func(f string) { e.mu.Lock(); e.queued = append(e.queued, f); e.mu.Unlock() },
			RunningFn:         func(f string) bool { return e.running[f] },
		},
		Close: func(f string) error { e.closed = append(e.closed, f); return nil },
		Log:   zerolog.Nop(),
	}
	return e
}

func (e *env) clock() time.Time { return e.now }

// code issues a code for a refused connection of group to host, as an
// alert does.
func (e *env) code(t *testing.T, group, host string) string {
	t.Helper()
	tx, err := e.db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	code, err := approvals.IssueTx(context.Background(), tx, security.Violation{Group: group, Kind: security.KindNetwork,
		Tool: "network", Target: host + ":443", Action: "blocked", Rule: "hostSecurity.network.allowedDomains"}, e.now)
	if err != nil || code == "" {
		t.Fatalf("no code: %q %v", code, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return code
}

// say posts text to the main chat from sender (the owner's own account
// when sender is ownerJID) and returns the answer; "" when the message was
// not a command.
func (e *env) say(t *testing.T, sender, text string) string {
	t.Helper()
	e.nextID++
	return e.deliver(t, channel.Message{ID: "m" + string(rune('A'+e.nextID)), ChatJID: mainJID, SenderJID: sender,
		FromMe: sender == ownerJID, Text: text, Time: e.now})
}

func (e *env) deliver(t *testing.T, m channel.Message) string {
	t.Helper()
	ctx := context.Background()
	g, err := e.reg.ByJID(ctx, m.ChatJID)
	if err != nil {
		t.Fatal(err)
	}
	var before int
	e.db.QueryRowContext(ctx, `SELECT count(*) FROM outbox`).Scan(&before)
	done, err := e.cmds.Handle(ctx, g, m)
	if err != nil {
		t.Fatalf("%s: %v", m.Text, err)
	}
	if !done {
		return ""
	}
	var texts []string
	rows, err := e.db.QueryContext(ctx, `SELECT text FROM outbox WHERE chat_jid = ? ORDER BY id LIMIT -1 OFFSET ?`, mainJID, before)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		rows.Scan(&s)
		texts = append(texts, s)
	}
	return strings.Join(texts, "\n")
}

func (e *env) domains(t *testing.T, folder string) []string {
	t.Helper()
	g, err := e.reg.ByFolder(context.Background(), folder)
	if err != nil {
		t.Fatal(err)
	}
	if g.Security == nil || g.Security.Network == nil {
		return nil
	}
	return g.Security.Network.AllowedDomains
}

func TestAllowAndUndo(t *testing.T) {
	e := newEnv(t)
	code := e.code(t, "family", "api.github.com")

	// Someone else in the main chat: refused, nothing changed.
	if got := e.say(t, "4915100000999@s.whatsapp.net", "/allow "+code); !strings.Contains(got, "only for the owner") {
		t.Errorf("a stranger's /allow: %q", got)
	}
	if d := e.domains(t, "family"); d != nil {
		t.Fatalf("a stranger's /allow changed the override: %v", d)
	}
	// A code for another group, named: refused.
	if got := e.say(t, ownerJID, "/allow "+code+" work"); !strings.Contains(got, "is for group family, not work") {
		t.Errorf("a code for another group: %q", got)
	}

	got := e.say(t, ownerJID, "/allow "+strings.ToLower(code))
	if !strings.Contains(got, "Allowed for family: network.allowedDomains + api.github.com") {
		t.Errorf("/allow answered %q", got)
	}
	// The group's own list replaces the global one, so it starts from it.
	if d := e.domains(t, "family"); !slices.Equal(d, []string{"api.anthropic.com", "api.github.com"}) {
		t.Errorf("family's allowedDomains = %v", d)
	}
	if d := e.domains(t, "work"); d != nil {
		t.Errorf("work changed too: %v", d)
	}
	// Once only.
	if got := e.say(t, ownerJID, "/allow "+code); !strings.Contains(got, "already used") {
		t.Errorf("a reused code: %q", got)
	}
	// The change is in the audit trail and the group's security.jsonl.
	var n int
	e.db.QueryRowContext(context.Background(), `SELECT count(*) FROM violations WHERE grp = 'family' AND action = ? AND target = 'api.github.com'`, approvals.ActionAllowed).Scan(&n)
	if n != 1 {
		t.Errorf("%d audit rows for the change, want 1", n)
	}
	line, _ := os.ReadFile(filepath.Join(e.cfg.GroupsDir, "family", "logs", "security.jsonl"))
	if !strings.Contains(string(line), `"action":"allowed-by-owner"`) || !strings.Contains(string(line), code) {
		t.Errorf("security.jsonl lacks the change:\n%s", line)
	}

	if got := e.say(t, ownerJID, "/undo"); !strings.Contains(got, "Undone for family: network.allowedDomains − api.github.com") {
		t.Errorf("/undo answered %q", got)
	}
	g, _ := e.reg.ByFolder(context.Background(), "family")
	if g.Security != nil {
		t.Errorf("after /undo the override is %+v, want none as before", g.Security)
	}
	if got := e.say(t, ownerJID, "/undo"); !strings.Contains(got, "Nothing to undo") {
		t.Errorf("a second /undo: %q", got)
	}
}

// An override changed by hand after an /allow keeps that change when the
// /allow is undone: only the allowed rule goes.
func TestUndoKeepsLaterChanges(t *testing.T) {
	e := newEnv(t)
	e.say(t, ownerJID, "/allow "+e.code(t, "family", "a.example"))
	g, _ := e.reg.ByFolder(context.Background(), "family")
	g.Security.AllowRead = []string{"/srv/photos"}
	if err := e.reg.SetSecurity(context.Background(), "family", g.Security); err != nil {
		t.Fatal(err)
	}
	e.say(t, ownerJID, "/undo")
	g, _ = e.reg.ByFolder(context.Background(), "family")
	if g.Security == nil || !slices.Equal(g.Security.AllowRead, []string{"/srv/photos"}) || slices.Contains(g.Security.Network.AllowedDomains, "a.example") {
		t.Errorf("after /undo: %+v", g.Security)
	}
}

func TestExpiredAndUnknownCodes(t *testing.T) {
	e := newEnv(t)
	code := e.code(t, "family", "late.example")
	e.now = e.now.Add(approvals.CodeTTL + time.Minute)
	if got := e.say(t, ownerJID, "/allow "+code); !strings.Contains(got, "has expired") {
		t.Errorf("an expired code: %q", got)
	}
	if got := e.say(t, ownerJID, "/allow ZZZ"); !strings.Contains(got, "no code ZZZ") {
		t.Errorf("an unknown code: %q", got)
	}
	if d := e.domains(t, "family"); d != nil {
		t.Errorf("the override changed: %v", d)
	}
}

// A command delivered twice (the channel redelivers after a crash before
// its acknowledgement) is carried out and answered once.
func TestRedeliveredCommandOnce(t *testing.T) {
	e := newEnv(t)
	m := channel.Message{ID: "dup", ChatJID: mainJID, SenderJID: ownerJID, FromMe: true, Text: "/pause family", Time: e.now}
	first := e.deliver(t, m)
	if !strings.Contains(first, "Paused family") {
		t.Fatalf("/pause answered %q", first)
	}
	if again := e.deliver(t, m); again != "" {
		t.Errorf("the redelivery was answered again: %q", again)
	}
}

func TestPauseResumeAndGroups(t *testing.T) {
	e := newEnv(t)
	e.cfg.Alerts.Approvers = []string{"+4915100000002"}
	admin := "4915100000002@s.whatsapp.net"
	// With approvers set, the paired account is one only if listed.
	if got := e.say(t, ownerJID, "/pause family"); !strings.Contains(got, "only for the owner") {
		t.Errorf("an unlisted owner: %q", got)
	}
	e.running["family"] = true
	if got := e.say(t, admin, "/pause family"); !strings.Contains(got, "Paused family") || !strings.Contains(got, "finishes its current answer") {
		t.Errorf("/pause: %q", got)
	}
	if !slices.Equal(e.closed, []string{"family"}) {
		t.Errorf("the running agent was not asked to finish: %v", e.closed)
	}
	e.running["family"] = false
	if got := e.say(t, admin, "/groups"); !strings.Contains(got, "- family (family): paused") || !strings.Contains(got, "- main (main): main, idle") {
		t.Errorf("/groups: %q", got)
	}
	if got := e.say(t, admin, "/pause nosuch"); !strings.Contains(got, "no group nosuch") {
		t.Errorf("/pause of an unknown group: %q", got)
	}
	if len(e.queued) != 0 {
		t.Errorf("queued %v before /resume", e.queued)
	}
	if got := e.say(t, admin, "/resume family"); !strings.Contains(got, "Resumed family") {
		t.Errorf("/resume: %q", got)
	}
	if !slices.Equal(e.queued, []string{"family"}) {
		t.Errorf("/resume queued %v, want family's run", e.queued)
	}
	// Anything else starting with "/" is the main agent's.
	if got := e.say(t, admin, "/summarize today"); got != "" {
		t.Errorf("/summarize was taken by the daemon: %q", got)
	}
	var n int
	e.db.QueryRowContext(context.Background(), `SELECT count(*) FROM violations WHERE grp = 'family' AND action IN (?, ?)`, approvals.ActionPaused, approvals.ActionResumed).Scan(&n)
	if n != 2 {
		t.Errorf("%d audit rows for pause and resume, want 2", n)
	}
	var raw string
	e.db.QueryRowContext(context.Background(), `SELECT security FROM groups WHERE folder = 'family'`).Scan(&raw)
	if raw != "" && json.Valid([]byte(raw)) {
		t.Errorf("pausing touched the override: %s", raw)
	}
}
