package metrics

import (
	"context"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/retention"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// fixture is the Parts of a daemon over a fresh database with the group
// family registered, and a way to write SQL into it.
func fixture(tb testing.TB) (Parts, func(q string, args ...any)) {
	tb.Helper()
	db, err := store.Open(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	reg := groups.New(db, tb.TempDir())
	if err := reg.Add(context.Background(), groups.Group{JID: "fam@g.us", Name: "Family", Folder: "family", Trigger: "@Andy"}); err != nil {
		tb.Fatal(err)
	}
	channels := &channel.Set{}
	parts := Parts{Channels: channels, DB: db, Outbox: outbox.New(db, channels, reg, zerolog.Nop()), Groups: reg, Usage: usage.NewStore(db),
		Standbys: func() int { return 0 },
		Health:   func(ctx context.Context) ([]usage.Health, error) { return usage.HealthOf(ctx, db) },
	}
	exec := func(q string, args ...any) {
		tb.Helper()
		if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
			tb.Fatal(err)
		}
	}
	return parts, exec
}

func snapshot(t *testing.T, p Parts) Snapshot {
	t.Helper()
	s, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every series is there before anything happened: each violation kind,
// IPC verdict, model API problem (down too) and registered group, at 0.
func TestSeriesFromTheStart(t *testing.T) {
	parts, _ := fixture(t)
	s := snapshot(t, parts)
	if want := map[string]bool{"credential": false, "rate": false, "down": false}; !reflect.DeepEqual(s.ModelAPI, want) {
		t.Errorf("model API problems %v, want %v", s.ModelAPI, want)
	}
	if len(s.Violations) != 6 || len(s.Runs) != 2 || s.IPC["handled"] != 0 || s.IPC["refused"] != 0 || len(s.IPC) != 2 {
		t.Errorf("violations %v, IPC %v", s.Violations, s.IPC)
	}
	if want := []Usage{{Group: "family"}}; !reflect.DeepEqual(s.Usage, want) {
		t.Errorf("usage %+v, want %+v", s.Usage, want)
	}
	_, text := scrape(t, New(parts), "tok", "Bearer tok")
	lint(t, text)
}

// What retention, the outbox and the IPC journal delete lowers no counter
// (the runs' records, pruned too, included); what happens next raises them. The usage of two providers serving the
// same model stays apart.
func TestCountersOutlivePruning(t *testing.T) {
	parts, exec := fixture(t)
	old := time.Now().Add(-72 * time.Hour)
	for i, id := range []string{"m1", "m2", "m3"} {
		exec(`INSERT INTO messages (chat_jid, id, sender, text, time, is_bot) VALUES ('fam@g.us', ?, 'ann', 'hi', ?, ?)`, id, old.UnixMilli(), i/2)
	}
	exec(`INSERT INTO cursors (chat_jid, answered_seq) VALUES ('fam@g.us', 99)`) // all answered: retention may prune them
	for _, text := range []string{"sent", "folded", "waiting"} {
		exec(`INSERT INTO outbox (chat_jid, text, kind, created_at) VALUES ('fam@g.us', ?, 'reply', ?)`, text, old.UnixNano())
	}
	exec(`UPDATE outbox SET sent_at = ? WHERE text = 'sent'`, old.UnixNano())
	exec(`UPDATE outbox SET sent_at = ?, last_error = 'folded into message 9' WHERE text = 'folded'`, old.UnixNano())
	for _, status := range []string{"sent", "sent", "refused"} {
		exec(`INSERT INTO ipc_journal (folder, sub, name, hash, status, type, task_id, new_folder, reason, done, decided_at)
			VALUES ('family', 'messages', 'f.json', 'h', ?, '', '', '', '', 1, ?)`, status, old.UnixMilli())
	}
	for _, kind := range []string{"network", "network", "group"} {
		exec(`INSERT INTO violations (time, grp, kind, tool, target, detail, action, logged) VALUES (?, 'family', ?, 'Bash', 'x', 'd', 'blocked', 1)`,
			old.UnixNano(), kind)
	}
	u := usage.NewStore(parts.DB)
	for _, p := range []string{"anthropic", "bedrock", "bedrock"} {
		if err := u.Record(context.Background(), usage.Request{Time: old, Group: "family", Run: "r", Provider: p, Model: "claude-sonnet-4-5",
			Tokens: gateway.Tokens{Input: 10}, CostUSD: 0.25, Priced: true}); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO upstream_health (kind, status, detail, since) VALUES ('down', 502, 'bad gateway', 0)`)
	for _, ok := range []bool{true, true, false} { // the group's last run: inserted, then replaced
		if err := runner.RecordLastRun(context.Background(), parts.DB, runner.LastRun{Folder: "family", Started: old, Finished: old, OK: ok}); err != nil {
			t.Fatal(err)
		}
	}

	before := snapshot(t, parts)
	want := Snapshot{MessagesIn: map[string]float64{"other": 2}, MessagesOut: map[string]float64{"other": 1}, Runs: map[string]float64{"ok": 2, "error": 1},
		IPC: map[string]float64{"handled": 2, "refused": 1}, Backlog: 1,
		Violations: map[string]float64{"filesystem": 0, "network": 2, "permission": 0, "tool": 0, "ipc": 0, "limit": 0, "group": 1},
		Usage: []Usage{{Group: "family"}, {Group: "family", Provider: "anthropic", Model: "claude-sonnet-4-5", Input: 10, Cost: 0.25},
			{Group: "family", Provider: "bedrock", Model: "claude-sonnet-4-5", Input: 20, Cost: 0.5}},
		Connected: map[string]bool{}, ModelAPI: map[string]bool{"credential": false, "rate": false, "down": true}}
	if !reflect.DeepEqual(before, want) {
		t.Fatalf("before pruning:\n%+v, want\n%+v", before, want)
	}

	res, err := (&retention.Pruner{DB: parts.DB, Log: zerolog.Nop(), Ages: func() retention.Ages {
		return retention.Ages{Messages: time.Hour, Usage: time.Hour, Audit: time.Hour, Runs: time.Hour}
	}}).Prune(context.Background())
	if err != nil || res.Deleted["messages"] != 3 || res.Deleted["usage"] != 3 || res.Deleted["audit"] != 3 {
		t.Fatalf("the pruning deleted %v (%v), want every old row", res.Deleted, err)
	}
	exec(`DELETE FROM outbox WHERE sent_at IS NOT NULL`) // as the outbox does at start
	exec(`DELETE FROM ipc_journal WHERE done = 1`)       // as the IPC watcher does
	if after := snapshot(t, parts); !reflect.DeepEqual(after, before) {
		t.Errorf("after pruning:\n%+v, want what it was:\n%+v", after, before)
	}

	exec(`INSERT INTO messages (chat_jid, id, sender, text, time) VALUES ('fam@g.us', 'm4', 'ann', 'again', ?)`, time.Now().UnixMilli())
	exec(`INSERT INTO messages (chat_jid, id, sender, text, time) VALUES ('fam@g.us', 'm4', 'ann', 'redelivered', ?)
		ON CONFLICT DO NOTHING`, time.Now().UnixMilli())
	exec(`INSERT INTO violations (time, grp, kind, tool, target, detail, action) VALUES (?, 'family', 'tool', 'Bash', 'x', 'd', 'blocked')`,
		time.Now().UnixNano())
	later := snapshot(t, parts)
	if later.MessagesIn["other"] != 3 || later.Violations["tool"] != 1 {
		t.Errorf("after a message and a violation: in %v, violations %v", later.MessagesIn, later.Violations)
	}
}

// BenchmarkScrape is one /metrics scrape of a database of a million
// messages, a hundred thousand model requests, sent messages, audit
// records and IPC files: it reads running totals, never the tables.
func BenchmarkScrape(b *testing.B) {
	parts, exec := fixture(b)
	const series = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) `
	now := time.Now()
	exec(series+`INSERT INTO messages (chat_jid, id, sender, text, time)
		SELECT 'chat' || (i % 40) || '@g.us', 'm' || i, 'ann', 'how is the weather tomorrow', ? FROM n`, 1_000_000, now.UnixMilli())
	exec(series+`INSERT INTO usage_requests (at, group_folder, run_id, provider, model, input_tokens, output_tokens,
		cache_write_tokens, cache_read_tokens, cost_usd, priced)
		SELECT ?, 'group' || (i % 20), 'r' || (i / 10), 'anthropic', 'claude-sonnet-4-5', 1200, 300, 0, 5000, 0.01, 1 FROM n`,
		100_000, now.UnixMilli())
	exec(series+`INSERT INTO outbox (chat_jid, text, kind, created_at, sent_at)
		SELECT 'chat' || (i % 40) || '@g.us', 'the answer', 'reply', ?, ? FROM n`, 200_000, now.UnixNano(), now.UnixNano())
	exec(series+`INSERT INTO violations (time, grp, kind, tool, target, detail, action, logged)
		SELECT ?, 'group' || (i % 20), 'network', 'Bash', 'evil.example', 'd', 'blocked', 1 FROM n`, 50_000, now.UnixNano())
	exec(series+`INSERT INTO ipc_journal (folder, sub, name, hash, status, type, task_id, new_folder, reason, done, decided_at)
		SELECT 'group' || (i % 20), 'messages', 'f' || i || '.json', 'h', 'sent', 'message', '', '', '', 1, ? FROM n`, 50_000, now.UnixMilli())
	exec(`ANALYZE`)
	m := New(parts)
	h := m.Handler(func() string { return "tok" })
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Authorization", "Bearer tok")
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}
