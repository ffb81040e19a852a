package ipc

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

const killChildEnv = "NANOCLAW_IPC_KILL_CHILD"

// sqlEffects records every effect in SQLite inside the journal
// transaction, as the daemon's outbox and audit table do, so the parent
// can count them after the process is killed.
type sqlEffects struct{}

func (sqlEffects) sendMessageTx(ctx context.Context, tx *store.Tx, id int64, from, chat, text string, _ *channel.Attachment) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO test_calls (key, what) VALUES (?, ?)`, id, text)
	return err
}
func (sqlEffects) reactTx(ctx context.Context, tx *store.Tx, id int64, _, _, _, emoji string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO test_calls (key, what) VALUES (?, ?)`, id, emoji)
	return err
}
func (sqlEffects) registerGroupTx(context.Context, *store.Tx, int64, newGroup) error { return nil }
func (sqlEffects) refusedTx(ctx context.Context, tx *store.Tx, id int64, v security.Violation, alert bool) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO test_calls (key, what) VALUES (?, ?)`, id, "violation")
	return err
}
func (sqlEffects) noticeTx(ctx context.Context, tx *store.Tx, _, text string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO test_calls (key, what) VALUES (?, ?)`, 0, "notice")
	return err
}
func (sqlEffects) committed(context.Context)           {}
func (sqlEffects) refreshGroups(context.Context) error { return nil }

// runKillChild is the daemon side of TestKill9: it handles files until it
// is killed.
func runKillChild(dataDir string) {
	ctx := context.Background()
	db, err := store.Open(dataDir)
	if err != nil {
		panic(err)
	}
	tokens, err := OpenTokens(ctx, db)
	if err != nil {
		panic(err)
	}
	l := layout.New(dataDir, filepath.Join(dataDir, "groups"))
	w, err := NewWatcher(Config{Layout: l, DB: db, Tokens: tokens, Groups: groups.New(db, l.GroupsDir),
		Tasks: scheduler.New(db, time.UTC, nil, nil, zerolog.Nop()), Log: zerolog.Nop()})
	if err != nil {
		panic(err)
	}
	w.fx = sqlEffects{}
	if _, err := w.Sync(ctx); err != nil {
		panic(err)
	}
	w.Run(ctx)
}

// TestKill9 kills the process handling IPC files twice, at arbitrary
// points, and restarts it: every valid file must be sent exactly once
// (a repeated call may only carry the same key, which the outbox drops)
// and every hostile file reported exactly once.
func TestKill9(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		runKillChild(dir)
		return
	}
	const valid, hostile = 400, 40
	dataDir := t.TempDir()
	db, err := store.Open(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	registerTestGroups(t, db, filepath.Join(dataDir, "groups"))
	if _, err := db.ExecContext(context.Background(), `CREATE TABLE test_calls (n INTEGER PRIMARY KEY, key TEXT, what TEXT)`); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tokens, _ := OpenTokens(ctx, db)
	token, _ := tokens.Issue(ctx, "family")
	dir := filepath.Join(dataDir, "ipc", "family", layout.MessagesDir)
	os.MkdirAll(dir, 0o700)
	for i := range valid + hostile {
		tok := token
		if i%11 == 0 && i/11 < hostile {
			tok = "forged"
		}
		body := fmt.Sprintf(`{"type":"message","chatJid":"family@g.us","text":"m-%03d","token":%q}`, i, tok)
		writeBytes(body)(filepath.Join(dir, fmt.Sprintf("%05d.json", i)))
	}
	wantCalls := valid + hostile

	count := func() (calls, keys int) {
		db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT key) FROM test_calls`).Scan(&calls, &keys)
		return
	}
	run := func(killAfter int, drained bool) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dataDir)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, keys := count()
			left, _ := os.ReadDir(dir)
			if keys >= killAfter && (!drained || len(left) == 0) {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("child handled %d of %d files in 30s", keys, killAfter)
			}
			time.Sleep(5 * time.Millisecond) // polling the child's progress, not synchronising
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
	}
	run(wantCalls/4, false)
	run(wantCalls/2, false)
	run(wantCalls, true)

	calls, keys := count()
	if keys != wantCalls {
		t.Fatalf("%d distinct actions; want %d", keys, wantCalls)
	}
	if calls-keys > 3 {
		t.Fatalf("%d repeated calls after 3 kills; at most one in-flight file per kill may be repeated", calls-keys)
	}
	var sentTwice int
	db.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT what FROM test_calls WHERE what != 'violation' GROUP BY what HAVING COUNT(DISTINCT key) > 1)`).Scan(&sentTwice)
	var texts, violations int
	db.QueryRowContext(ctx, `SELECT COUNT(DISTINCT what) FROM test_calls WHERE what != 'violation'`).Scan(&texts)
	db.QueryRowContext(ctx, `SELECT COUNT(DISTINCT key) FROM test_calls WHERE what = 'violation'`).Scan(&violations)
	if sentTwice != 0 || texts != valid || violations != hostile {
		t.Fatalf("texts %d (want %d), sent under two keys %d, violations %d (want %d)", texts, valid, sentTwice, violations, hostile)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("%d files left in messages/", len(left))
	}
	quarantined, _ := filepath.Glob(filepath.Join(dataDir, "ipc", layout.ErrorsDir, "*.json"))
	if len(quarantined) != hostile {
		t.Fatalf("%d files quarantined; want %d", len(quarantined), hostile)
	}
	t.Logf("%d calls for %d files across 3 kills (repeats carry the same key)", calls, keys)
}
