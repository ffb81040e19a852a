package alerts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

const famJID = "120363000000000002@g.us"

// refuseText makes the recorder refuse messages whose text is in bad with
// that error, and counts every attempt per text.
func refuseText(e *env, bad map[string]error) func() map[string]int {
	var mu sync.Mutex
	tries := map[string]int{}
	e.rec.mu.Lock()
	e.rec.refuse = func(m channel.Outgoing) error {
		mu.Lock()
		tries[m.Text]++
		mu.Unlock()
		return bad[m.Text]
	}
	e.rec.mu.Unlock()
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
	e := newEnv(t, "", time.Minute, nil, false)
	e.out.Main = func(context.Context) (string, string, bool) { return mainFolder, mainJID, true }
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
		m := e.rec.next(t)
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
	e := newEnv(t, "", time.Minute, nil, false)
	e.out.GiveUpAfter = 0 // give up at the first retry after a failure
	var mu sync.Mutex
	down := 3
	tries := refuseText(e, nil)
	e.rec.mu.Lock()
	inner := e.rec.refuse
	e.rec.refuse = func(m channel.Outgoing) error {
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
	}
	e.rec.mu.Unlock()
	enqueue(t, e, famJID, "weird")
	enqueue(t, e, famJID, "after")
	enqueue(t, e, mainJID, "waits")
	e.start(t)

	got := map[string]bool{}
	for len(got) < 2 {
		got[e.rec.next(t).Text] = true
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
	e.db.QueryRow(`SELECT last_error FROM outbox WHERE text = 'weird' AND failed_at IS NOT NULL`).Scan(&lastErr)
	if lastErr != "server returned error 500" {
		t.Errorf("failed row's last_error = %q", lastErr)
	}
}

func TestMessageIDsAreStableAcrossRetriesAndUniquePerInstall(t *testing.T) {
	ids := func() []string {
		e := newEnv(t, "", time.Minute, nil, false)
		var mu sync.Mutex
		var seen []string
		e.rec.refuse = func(m channel.Outgoing) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, m.ID)
			if len(seen) == 1 {
				return errors.New("flaky")
			}
			return nil
		}
		enqueue(t, e, famJID, "x")
		e.start(t)
		e.rec.next(t)
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
	e := newEnv(t, "", time.Minute, nil, false)
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
