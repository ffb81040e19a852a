package alerts

// The cap: distinct targets and no cooldown still bring at most
// MaxPerMinute alert messages of a group to the main chat in a minute.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

func ipcViolation(group string, i int) security.Violation {
	return security.Violation{Group: group, Kind: security.KindIPC, Tool: "ipc",
		Target: fmt.Sprintf("ipc/%s/messages/f%06d.json", group, i), Detail: "wrong or expired token", Action: "blocked"}
}

func TestCapHoldsWhateverTheTargets(t *testing.T) {
	for _, cooldown := range []time.Duration{0, time.Minute} {
		t.Run(cooldown.String(), func(t *testing.T) {
			clock := &fakeClock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
			e := newEnv(t, "", cooldown, clock.Now, false)
			e.rep.MaxPerGroup = 100 // the cap holds even when the cooldown's own limit is higher
			ctx := context.Background()
			const total = 500
			for i := range total {
				if err := e.rep.Report(ctx, ipcViolation("family", i)); err != nil {
					t.Fatal(i, err)
				}
				if i%100 == 99 {
					clock.Add(time.Second)
				}
			}
			// Another group has its own minute.
			if err := e.rep.Report(ctx, netViolation("work", "evil.example")); err != nil {
				t.Fatal(err)
			}
			if n := e.count(t, `SELECT count(*) FROM outbox WHERE text LIKE '%"family"%'`); n != MaxPerMinute {
				t.Errorf("%d alert messages of family in the flood's first seconds, want %d", n, MaxPerMinute)
			}
			if n := e.count(t, `SELECT count(*) FROM outbox WHERE text LIKE '%"work"%'`); n != 1 {
				t.Errorf("%d alert messages of work, want 1", n)
			}
			// They are sent, and the minute passes: one summary accounts
			// for everything held back.
			e.sendAll(t, clock.Now())
			clock.Add(2 * time.Minute)
			if _, err := e.rep.sendDue(ctx); err != nil {
				t.Fatal(err)
			}
			rows, err := e.db.QueryContext(ctx, `SELECT text FROM outbox WHERE text LIKE '%"family"%' ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			sum, msgs, capped := 0, 0, ""
			for rows.Next() {
				var text string
				if err := rows.Scan(&text); err != nil {
					t.Fatal(err)
				}
				sum += counted(t, text)
				msgs++
				if strings.Contains(text, "in the last minute") {
					capped = text
				}
			}
			if sum != total {
				t.Errorf("messages account for %d violations, want %d", sum, total)
			}
			if msgs > MaxPerMinute+2 {
				t.Errorf("%d messages for one flood, want at most %d", msgs, MaxPerMinute+2)
			}
			if !strings.Contains(capped, "more refused files from family in the last minute") {
				t.Errorf("no summary of the cap: %q", capped)
			}
			if n := e.count(t, `SELECT count(*) FROM violations WHERE grp = 'family'`); n != total {
				t.Errorf("%d audit rows, want %d: the cap must not drop the audit", n, total)
			}
		})
	}
}

// Within any minute, the cap's summary counts as one of the ten.
func TestCapCountsItsSummary(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	e := newEnv(t, "", 0, clock.Now, false)
	ctx := context.Background()
	for i := range 3 * MaxPerMinute {
		if err := e.rep.Report(ctx, ipcViolation("family", i)); err != nil {
			t.Fatal(err)
		}
	}
	e.sendAll(t, clock.Now())
	clock.Add(time.Minute + time.Second)
	if _, err := e.rep.sendDue(ctx); err != nil {
		t.Fatal(err)
	}
	// The summary took one slot of the new minute; the next nine alerts
	// go out and the tenth waits.
	for i := range MaxPerMinute {
		if err := e.rep.Report(ctx, ipcViolation("family", 1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	since := clock.Now().Add(-time.Minute).UnixNano()
	if n := e.count(t, `SELECT count(*) FROM alert_sent s JOIN outbox o ON o.id = s.outbox_id
		WHERE s.grp = 'family' AND (o.sent_at IS NULL OR o.sent_at > ?)`, since); n != MaxPerMinute {
		t.Errorf("%d alert messages in the last minute or waiting, want %d", n, MaxPerMinute)
	}
	if n := e.count(t, `SELECT n FROM alert_capped WHERE grp = 'family'`); n != 1 {
		t.Errorf("%d held back, want 1", n)
	}
}

// An outbox that was held up sends a burst: what counts is when messages
// go out, so a minute's alerts still waiting leave no room for the next.
func TestCapCountsWhatWaitsToBeSent(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	e := newEnv(t, "", 0, clock.Now, false)
	ctx := context.Background()
	for i := range MaxPerMinute {
		if err := e.rep.Report(ctx, ipcViolation("family", i)); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(5 * time.Minute) // nothing was sent meanwhile
	if err := e.rep.Report(ctx, ipcViolation("family", 99)); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != MaxPerMinute {
		t.Errorf("%d alert messages queued while %d wait unsent, want %d", n, MaxPerMinute, MaxPerMinute)
	}
}

// sendAll marks every queued message sent at at, as the outbox would.
func (e *env) sendAll(t testing.TB, at time.Time) {
	t.Helper()
	if _, err := e.db.ExecContext(context.Background(), `UPDATE outbox SET sent_at = ? WHERE sent_at IS NULL`, at.UnixNano()); err != nil {
		t.Fatal(err)
	}
}

// A notice of the group's state counts in its minute; when the minute is
// full it is held and sent first in the cap's summary, never dropped.
func TestNoticeWaitsForTheCap(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	e := newEnv(t, "", 0, clock.Now, false)
	ctx := context.Background()
	for i := range MaxPerMinute + 5 {
		if err := e.rep.Report(ctx, ipcViolation("family", i)); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := e.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rep.NoticeTx(ctx, tx, "family", "[SANDBOX ALERT] family is paused"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != MaxPerMinute {
		t.Fatalf("%d messages queued in a full minute, want %d", n, MaxPerMinute)
	}
	e.sendAll(t, clock.Now())
	clock.Add(time.Minute + time.Second)
	if _, err := e.rep.sendDue(ctx); err != nil {
		t.Fatal(err)
	}
	var text string
	if err := e.db.QueryRowContext(ctx, `SELECT text FROM outbox ORDER BY id DESC LIMIT 1`).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, "[SANDBOX ALERT] family is paused\n[SANDBOX ALERT] +5 more refused files from family in the last minute") {
		t.Errorf("the summary does not carry the notice first:\n%s", text)
	}
}
