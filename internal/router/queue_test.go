package router

import (
	"bytes"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

type wakeFunc func()

func (f wakeFunc) Wake() { f() }

// signalWriter is a log that closes seen the first time a line holds want.
type signalWriter struct {
	want string
	seen chan struct{}
	once sync.Once
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return w.buf.Write(p)
}

// An answer that arrives while another process holds the database locked
// waits for the lock instead of being dropped: dropped, the next
// follow-up's answer would move the cursor past the messages it answered
// (the chaos suite lost a message that way).
func TestAnswerWaitsForALockedDatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data", store.FileName)
	other, err := store.Open(filepath.Dir(path)) // migrates; then it is the other process
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// The router's own connection gives up on a lock at once, as the
	// daemon's does after its busy timeout.
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=1&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log := &signalWriter{want: "trying again", seen: make(chan struct{})}
	r := &Router{DB: db, Outbox: wakeFunc(func() {}), Log: zerolog.New(log)}
	g := groups.Group{JID: "local:family", Folder: "family"}
	run := &agentRun{router: r, group: g, replyTo: g.JID, batches: []int64{1, 2}}
	text := func(s string) runner.Result { return runner.Result{Status: "success", Result: &s} }

	lock, err := other.Begin()
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan struct{})
	go func() { defer close(answered); run.OnResult(text("one")) }()
	select {
	case <-log.seen:
	case <-answered:
		t.Fatalf("the first answer returned while the database was locked; log:\n%s", log.buf.String())
	case <-time.After(time.Minute):
		t.Fatal("the first answer neither returned nor retried")
	}
	lock.Rollback()
	<-answered
	run.OnResult(text("two")) // a follow-up's answer

	var texts []string
	rows, err := db.Query(`SELECT text FROM outbox ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		rows.Scan(&s)
		texts = append(texts, s)
	}
	var cursor int64
	db.QueryRow(`SELECT answered_seq FROM cursors WHERE chat_jid = ?`, g.JID).Scan(&cursor)
	if !slices.Equal(texts, []string{"one", "two"}) || cursor != 2 {
		t.Errorf("outbox %q, cursor %d; want both answers and cursor 2", texts, cursor)
	}
}
