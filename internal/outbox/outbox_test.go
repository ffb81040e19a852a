package outbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
	"github.com/nanoclawd/nanoclawd/internal/testkit/outboxtest"
	"github.com/rs/zerolog"
)

const (
	mainJID  = "120363000000000001@g.us"
	famJID   = "120363000000000002@g.us"
	deadline = outboxtest.Deadline
)

type env struct {
	db  *store.DB
	out *Outbox
	rec *outboxtest.Recorder
}

// newEnv builds an outbox over a fresh database that sends to a recorder;
// start runs it until the test ends.
func newEnv(t testing.TB) *env { return newEnvTelling(t, nil) }

// newEnvTelling is newEnv with main as the main chat the outbox tells.
func newEnvTelling(t testing.TB, main MainChat) *env {
	t.Helper()
	db, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{db: db, rec: outboxtest.NewRecorder()}
	e.out = New(db, e.rec, main, zerolog.Nop())
	e.out.MinBackoff, e.out.MaxBackoff = time.Millisecond, 5*time.Millisecond
	return e
}

func (e *env) start(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.out.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (e *env) count(t testing.TB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := e.db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// refuseText makes the recorder refuse messages whose text is in bad with
// that error, and counts every attempt per text.
func refuseText(e *env, bad map[string]error) func() map[string]int {
	var mu sync.Mutex
	tries := map[string]int{}
	e.rec.Refuse(func(m channel.Outgoing) error {
		mu.Lock()
		tries[m.Text]++
		mu.Unlock()
		return bad[m.Text]
	})
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range tries {
			out[k] = v
		}
		return out
	}
}

func enqueue(t *testing.T, e *env, chat, text string) {
	t.Helper()
	if _, err := e.out.Enqueue(context.Background(), chat, text, KindReply); err != nil {
		t.Fatal(err)
	}
}

func TestUndeliverableMessageIsDroppedOnceAndTheChatMovesOn(t *testing.T) {
	e := newEnvTelling(t, &mock.MainChat{MainChatFn: func(context.Context) (string, string, bool) { return "main", mainJID, true }})
	gone := fmt.Errorf("send to %s: not in group: %w", famJID, channel.ErrUndeliverable)
	tries := refuseText(e, map[string]error{"one": gone, "three": gone})
	enqueue(t, e, famJID, "one")
	enqueue(t, e, famJID, "two")
	enqueue(t, e, famJID, "three")
	enqueue(t, e, famJID, "four")
	e.start(t)

	var fam []string
	var notices []string
	for len(fam) < 2 || len(notices) < 1 {
		m := e.rec.Next(t)
		if m.ChatJID == mainJID {
			notices = append(notices, m.Text)
		} else {
			fam = append(fam, m.Text)
		}
	}
	if strings.Join(fam, ",") != "two,four" {
		t.Errorf("family chat got %v, want [two four]: the messages after an undeliverable one must still go out in order", fam)
	}
	if !strings.Contains(notices[0], famJID) || !strings.Contains(notices[0], "not in group") {
		t.Errorf("main's notice does not name the chat and the reason:\n%s", notices[0])
	}
	if n := tries()["one"]; n != 1 {
		t.Errorf("undeliverable message tried %d times, want 1", n)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE failed_at IS NOT NULL AND chat_jid = ?`, famJID); n != 2 {
		t.Errorf("%d failed rows recorded for the family chat, want 2", n)
	}
	// The second failure in that chat is recorded but not told again:
	// everything is settled once no row waits, and main got one notice.
	waitFor(t, func() bool {
		return e.count(t, `SELECT count(*) FROM outbox WHERE sent_at IS NULL AND failed_at IS NULL`) == 0
	})
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE chat_jid = ? AND kind = ?`, mainJID, KindNotice); n != 1 {
		t.Errorf("main was told %d times about the family chat, want once", n)
	}
}

func TestUnexplainedErrorGivesUpButAnOutageWaits(t *testing.T) {
	e := newEnv(t)
	e.out.GiveUpAfter = 0 // give up at the first retry after a failure
	var mu sync.Mutex
	down := 3
	tries := refuseText(e, nil)
	inner := e.rec.Refusing()
	e.rec.Refuse(func(m channel.Outgoing) error {
		inner(m)
		switch m.Text {
		case "weird":
			return errors.New("server returned error 500")
		case "waits":
			mu.Lock()
			defer mu.Unlock()
			if down > 0 {
				down--
				return fmt.Errorf("send: %w", channel.ErrUnavailable)
			}
		}
		return nil
	})
	enqueue(t, e, famJID, "weird")
	enqueue(t, e, famJID, "after")
	enqueue(t, e, mainJID, "waits")
	e.start(t)

	got := map[string]bool{}
	for len(got) < 2 {
		got[e.rec.Next(t).Text] = true
	}
	if !got["after"] || !got["waits"] {
		t.Fatalf("sent %v, want the message after the failing one and the one that waited out the outage", got)
	}
	if n := tries()["weird"]; n != 2 {
		t.Errorf("failing message tried %d times, want 2 (fail, then give up at the retry)", n)
	}
	if n := tries()["waits"]; n != 4 {
		t.Errorf("message during an outage tried %d times, want 4: an outage must never make the outbox give up", n)
	}
	var lastErr string
	e.db.QueryRowContext(context.Background(), `SELECT last_error FROM outbox WHERE text = 'weird' AND failed_at IS NOT NULL`).Scan(&lastErr)
	if lastErr != "server returned error 500" {
		t.Errorf("failed row's last_error = %q", lastErr)
	}
}

func TestMessageIDsAreStableAcrossRetriesAndUniquePerInstall(t *testing.T) {
	ids := func() []string {
		e := newEnv(t)
		var mu sync.Mutex
		var seen []string
		e.rec.Refuse(func(m channel.Outgoing) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, m.ID)
			if len(seen) == 1 {
				return errors.New("flaky")
			}
			return nil
		})
		enqueue(t, e, famJID, "x")
		e.start(t)
		e.rec.Next(t)
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
	a, b := ids(), ids()
	if len(a) != 2 || a[0] != a[1] {
		t.Errorf("IDs of one message across a retry: %v, want the same twice", a)
	}
	if a[0] == b[0] {
		t.Errorf("row 1 of two fresh databases both got ID %q: IDs repeat after a database reset", a[0])
	}
}

// waitFor polls cond (a database fact with no event to wait on) until the deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatal("condition not met within the deadline")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A message given up on is no longer part of the backlog `status` shows.
func TestBacklogLeavesOutFailedMessages(t *testing.T) {
	e := newEnv(t)
	refuseText(e, map[string]error{"gone": channel.ErrUndeliverable})
	enqueue(t, e, famJID, "gone")
	e.start(t)
	waitFor(t, func() bool { return e.count(t, `SELECT count(*) FROM outbox WHERE failed_at IS NOT NULL`) == 1 })
	b, err := e.out.Backlog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range b {
		if c.ChatJID == famJID {
			t.Errorf("backlog still lists the failed message: %+v", c)
		}
	}
}

func TestRefusingSenderLosesAndDoublesNothing(t *testing.T) {
	e := newEnv(t)
	var (
		mu      sync.Mutex
		refused int
	)
	e.rec.Refuse(func(channel.Outgoing) error {
		mu.Lock()
		defer mu.Unlock()
		if refused < 40 {
			refused++
			return errors.New("not connected")
		}
		return nil
	})
	ctx := context.Background()
	chats := []string{"a@g.us", "b@g.us"}
	const per = 100
	e.start(t)
	for i := range per {
		for _, c := range chats {
			if _, err := e.out.Enqueue(ctx, c, fmt.Sprintf("%s %d", c, i), KindReply); err != nil {
				t.Fatal(err)
			}
		}
	}
	next := map[string]int{}
	seen := map[string]bool{}
	for range per * len(chats) {
		m := e.rec.Next(t)
		if seen[m.ID] {
			t.Fatalf("message %s sent twice", m.ID)
		}
		seen[m.ID] = true
		if want := fmt.Sprintf("%s %d", m.ChatJID, next[m.ChatJID]); m.Text != want {
			t.Fatalf("got %q, want %q (order broken)", m.Text, want)
		}
		next[m.ChatJID]++
	}
	if err := e.out.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`); n != 0 {
		t.Errorf("%d messages left unsent", n)
	}
	if m, ok := e.rec.Extra(); ok {
		t.Errorf("extra message %+v", m)
	}
	if e.rec.Overlapped() {
		t.Error("two sends to one chat ran at once")
	}
	if refused != 40 {
		t.Errorf("sender refused %d times, want 40", refused)
	}
}

// Notify (a channel reconnected) cuts a long backoff short.
func TestNotifyRetriesAtOnce(t *testing.T) {
	e := newEnv(t)
	e.out.MinBackoff, e.out.MaxBackoff = time.Hour, time.Hour
	refused := make(chan struct{}, 1)
	var down sync.Mutex
	isDown := true
	e.rec.Refuse(func(channel.Outgoing) error {
		down.Lock()
		defer down.Unlock()
		if isDown {
			select {
			case refused <- struct{}{}:
			default:
			}
			return errors.New("offline")
		}
		return nil
	})
	e.start(t)
	if _, err := e.out.Enqueue(context.Background(), "a@g.us", "hello", KindReply); err != nil {
		t.Fatal(err)
	}
	select {
	case <-refused:
	case <-time.After(deadline):
		t.Fatal("first attempt never made")
	}
	down.Lock()
	isDown = false
	down.Unlock()
	e.out.Notify()
	if m := e.rec.Next(t); m.Text != "hello" {
		t.Errorf("got %q", m.Text)
	}
}

func TestFlushWithoutRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := e.out.Enqueue(ctx, "a@g.us", strconv.Itoa(i), KindReply); err != nil {
			t.Fatal(err)
		}
	}
	e.rec.Refuse(func(channel.Outgoing) error { return errors.New("offline") })
	if err := e.out.Flush(ctx); err == nil || !strings.Contains(err.Error(), "3 messages still queued") {
		t.Errorf("Flush with the channel down = %v", err)
	}
	e.rec.Refuse(nil)
	if err := e.out.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if m := e.rec.Next(t); m.Text != strconv.Itoa(i) {
			t.Errorf("message %d = %q", i, m.Text)
		}
	}
	if _, err := e.out.Enqueue(ctx, "", "x", KindReply); !errors.Is(err, ErrNoChat) {
		t.Errorf("Enqueue without a chat = %v", err)
	}
}
