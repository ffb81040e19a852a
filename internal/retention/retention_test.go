package retention

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

func count(t *testing.T, db *store.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Old rows of every kind go, in batches, and what must stay stays: recent
// rows, a message still waiting for its answer, a violation not yet in
// the security log. The search index follows the messages, and the file
// gives its freed pages back.
func TestPrune(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	old, recent := now.Add(-3*24*time.Hour), now.Add(-time.Hour)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO groups (jid, name, folder, trigger, added_at) VALUES ('fam@g.us', 'Family', 'family', '@Andy', '2026-01-01T00:00:00Z')`)
	filler := strings.Repeat("plumber lorem ipsum dolor sit amet ", 30)
	tx, _ := db.Begin(context.Background())
	for i := range 3000 {
		at := old
		if i%1000 == 0 {
			at = recent
		}
		tx.Exec(`INSERT INTO usage_requests (at, group_folder, run_id, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd, priced)
			VALUES (?, 'family', 'r', 'm', 1, 1, 0, 0, 0.1, 1)`, at.UnixMilli())
		tx.Exec(`INSERT INTO messages (chat_jid, id, sender, text, time) VALUES ('fam@g.us', ?, 'ann', ?, ?)`, "m"+strconv.Itoa(i), filler, at.UnixMilli())
	}
	// The last 10 old messages of the family chat are not answered yet.
	tx.Exec(`INSERT INTO cursors (chat_jid, answered_seq) VALUES ('fam@g.us', (SELECT max(seq) - 10 FROM messages))`)
	tx.Exec(`INSERT INTO messages (chat_jid, id, sender, text, time) VALUES ('stranger@s.whatsapp.net', 'x1', 'eve', 'old plumber', ?)`, old.UnixMilli())
	tx.Exec(`INSERT INTO violations (time, grp, kind, tool, target, detail, action, logged) VALUES (?, 'family', 'ipc', 'ipc', 't', 'd', 'blocked', 1)`, old.UnixNano())
	tx.Exec(`INSERT INTO violations (time, grp, kind, tool, target, detail, action, logged) VALUES (?, 'family', 'ipc', 'ipc', 't', 'd', 'blocked', 0)`, old.UnixNano())
	tx.Exec(`INSERT INTO task_run_logs (task_id, started_at, status) VALUES ('t', ?, 'success')`, old.UnixMilli())
	tx.Exec(`INSERT INTO run_hours (folder, hour, runs) VALUES ('family', ?, 1)`, old.Unix()/3600)
	tx.Exec(`INSERT INTO run_hours (folder, hour, runs) VALUES ('family', ?, 1)`, recent.Unix()/3600)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// These are indexed; the stranger's next ones are not yet.
	if err := messages.New(db).Index(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		exec(`INSERT INTO messages (chat_jid, id, sender, text, time) VALUES ('stranger@s.whatsapp.net', ?, 'eve', 'old plumber', ?)`, "p"+strconv.Itoa(i), old.UnixMilli())
	}
	db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(TRUNCATE)`)
	sizeBefore := fileSize(t, dir)

	p := &Pruner{DB: db, Log: zerolog.Nop(), Ages: func() Ages {
		return Ages{Messages: 2 * 24 * time.Hour, Usage: 24 * time.Hour, Audit: 24 * time.Hour, Runs: 24 * time.Hour}
	}}
	res, err := p.Prune(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pruned %v, longest write transaction %v, freed %d bytes", res.Deleted, res.Longest, res.Freed)
	if n := count(t, db, `SELECT count(*) FROM usage_requests`); n != 3 {
		t.Errorf("%d usage rows left, want the 3 recent ones", n)
	}
	// 3 recent, plus the 10 unanswered of the 2997 old; the stranger's goes.
	if n := count(t, db, `SELECT count(*) FROM messages`); n != 13 {
		t.Errorf("%d messages left, want 13 (3 recent, 10 unanswered)", n)
	}
	if n := count(t, db, `SELECT count(*) FROM violations`); n != 1 {
		t.Errorf("%d violations left, want the one not yet logged", n)
	}
	if n := count(t, db, `SELECT count(*) FROM task_run_logs`) + count(t, db, `SELECT count(*) FROM run_hours`); n != 1 {
		t.Errorf("%d run records left, want the recent hour", n)
	}
	// Most messages were indexed before the prune, the stranger's were
	// not yet: both kinds went without leaving words behind.
	if err := messages.New(db).Index(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(context.Background(), `INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)`); err != nil {
		t.Errorf("the search index no longer matches the messages: %v", err)
	}
	if n := count(t, db, `SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'plumber'`); n != 13 {
		t.Errorf("the index finds %d messages, want 13", n)
	}
	if n := count(t, db, `PRAGMA freelist_count`); n != 0 {
		t.Errorf("%d free pages left in the file after the vacuum", n)
	}
	db.ExecContext(context.Background(), `PRAGMA wal_checkpoint(TRUNCATE)`)
	if after := fileSize(t, dir); after >= sizeBefore/2 || res.Freed == 0 {
		t.Errorf("the file went from %d to %d bytes (freed %d); want it to shrink", sizeBefore, after, res.Freed)
	}

	// Nothing is pruned for a kind without an age.
	p.Ages = func() Ages { return Ages{} }
	if res, err := p.Prune(context.Background()); err != nil || res.total() != 0 {
		t.Errorf("with every age 0: %v, %v", res.Deleted, err)
	}
}

func fileSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(layout.New(dir, "").DB())
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
