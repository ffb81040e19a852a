package messages

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// An answer that arrives while another process holds the database locked
// waits for the lock instead of being dropped: dropped, the next
// follow-up's answer would move the cursor past the messages it answered
// (the chaos suite lost messages that way).
func TestAnswerWaitsForALockedDatabase(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	other, err := store.Open(dir) // migrates; then it plays the other process
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// This store's connection gives up on a lock at once, as the daemon's
	// does after its busy timeout.
	db, err := sql.Open("sqlite3", "file:"+layout.New(dir, "").DB()+"?_busy_timeout=1&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, ctx := New(store.Wrap(db)), context.Background()
	out := outboxOf(s)

	lock, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(`INSERT INTO cursors (chat_jid, answered_seq) VALUES ('someone else', 1)`); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		answered <- s.Answer(ctx, out, Answer{ReplyTo: chat, Text: "one", Kind: "reply", Chat: chat, UpTo: 1})
	}()
	// The answer cannot have committed while the lock is held; it must still
	// be waiting once the lock goes, and then succeed.
	var busy error
	for deadline := time.Now().Add(10 * time.Second); busy == nil && time.Now().Before(deadline); {
		_, busy = db.Begin() // another writer on this connection's terms fails while locked
	}
	if !store.Busy(busy) {
		t.Fatalf("the lock did not hold: %v", busy)
	}
	select {
	case err := <-answered:
		t.Fatalf("Answer returned (%v) while the database was locked", err)
	default:
	}
	lock.Commit()
	if err := <-answered; err != nil {
		t.Fatalf("Answer after the lock went: %v", err)
	}
	if err := s.Answer(ctx, out, Answer{ReplyTo: chat, Text: "two", Kind: "reply", Chat: chat, UpTo: 2}); err != nil {
		t.Fatal(err)
	}
	var got []string
	rows, err := db.Query(`SELECT text FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		rows.Scan(&s)
		got = append(got, s)
	}
	var cursor int64
	db.QueryRow(`SELECT answered_seq FROM cursors WHERE chat_jid = ?`, chat).Scan(&cursor)
	if !slices.Equal(got, []string{"one", "two"}) || cursor != 2 {
		t.Errorf("outbox %q, cursor %d; want both answers, cursor 2", got, cursor)
	}
}
