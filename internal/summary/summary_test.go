package summary

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/backup"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

func TestNext(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	tests := []struct {
		now  time.Time
		h, m int
		want time.Time
	}{
		{time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC), 8, 0, time.Date(2026, 11, 26, 8, 0, 0, 0, berlin)},                    // 07:00 Berlin: today
		{time.Date(2026, 11, 26, 7, 0, 0, 0, time.UTC), 8, 0, time.Date(2026, 11, 27, 8, 0, 0, 0, berlin)},                    // 08:00 Berlin: tomorrow
		{time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC), 8, 0, time.Date(2026, 3, 29, 6, 0, 0, 0, time.UTC)},                   // spring forward: 08:00 CEST
		{time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC), 2, 30, time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)},                 // 02:30 does not exist that night
		{time.Date(2026, 12, 31, 23, 30, 0, 0, time.UTC), 0, 15, time.Date(2027, 1, 1, 0, 15, 0, 0, berlin).AddDate(0, 0, 1)}, // 00:30 Berlin on 1 Jan: next day
	}
	for _, tt := range tests {
		if got := Next(tt.now, tt.h, tt.m, berlin); !got.Equal(tt.want) {
			t.Errorf("Next(%v, %02d:%02d) = %v, want %v", tt.now, tt.h, tt.m, got, tt.want)
		}
	}
}

func TestText(t *testing.T) {
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	got := Text(Facts{
		At:         at,
		Runs:       map[string]runner.RunCount{"main": {Runs: 4}, "family": {Runs: 1, Failures: 1}},
		Violations: map[string]int{"family": 3},
		LastBackup: &backup.Last{Time: at.Add(-2 * time.Hour), OK: true, Archive: "/b/nanoclawd-x.tar.gz", Bytes: 2_500_000, Verified: true},
		Link:       Link{Enabled: true, Connected: true, Since: at.Add(-(50*time.Hour + 5*time.Minute))},
	})
	for _, want := range []string{
		"[DAILY] nanoclawd, Thu 26 Nov 08:00",
		"• family: 1 run, 1 failed\n• main: 4 runs\n",
		"Spend: not counted",
		"Violations: family 3",
		"Last backup: ok at ", "/b/nanoclawd-x.tar.gz (2.5 MB, verified)",
		"WhatsApp: connected for 2d 2h",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	got = Text(Facts{At: at, Spend: map[string]usage.Total{"main": {Requests: 3, Priced: 3, CostUSD: 1.5}, "family": {Requests: 1, Priced: 1, CostUSD: 0.25}},
		Link: Link{Enabled: true, Since: at.Add(-7 * time.Minute)}})
	for _, want := range []string{"Runs: none", "Spend: $1.75 (family $0.25, main $1.50)", "Violations: none", "Last backup: none yet", "WhatsApp: NOT connected, for 7m"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
	// A model without a price is unpriced, never $0.00.
	got = Text(Facts{At: at, Spend: map[string]usage.Total{
		"main":   {Requests: 2, Priced: 1, CostUSD: 0.5, Unpriced: []string{"local-llm"}},
		"family": {Requests: 4, Unpriced: []string{"local-llm"}}}})
	if want := "Spend: $0.50 + unpriced (family unpriced, main $0.50 + unpriced)"; !strings.Contains(got, want) {
		t.Errorf("summary lacks %q:\n%s", want, got)
	}
}

// fakeClock fires a timer only when the test says so, and moves Now to it.
type fakeClock struct {
	now    time.Time
	asked  chan time.Duration
	firing chan time.Time
}

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.asked <- d
	return c.firing
}

type notices chan string

func (n notices) TellMain(_ context.Context, text string) { n <- text }

type conn struct{ since time.Time }

func (c conn) Connection() (bool, time.Time) { return true, c.since }

// With an injected clock: the summary waits for the configured local time
// and then sends the day's facts from the real database to the main chat.
func TestDailySendsAtLocalTime(t *testing.T) {
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	dir := t.TempDir()
	l := layout.New(filepath.Join(dir, "data"), filepath.Join(dir, "groups"))
	db, err := store.Open(l.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 11, 26, 22, 0, 0, 0, time.UTC) // 07:00 in Tokyo
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ok := range []bool{true, true, false} {
		if err := runner.RecordLastRun(ctx, db, runner.LastRun{Folder: "family", Started: now.Add(-time.Hour), Finished: now.Add(-time.Hour), OK: ok}); err != nil {
			t.Fatal(err)
		}
	}
	// A run two days ago is not today's.
	if err := runner.RecordLastRun(ctx, db, runner.LastRun{Folder: "old", Started: now.Add(-48 * time.Hour), Finished: now.Add(-48 * time.Hour), OK: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO violations (time, grp, kind, tool, target, detail, action) VALUES (?, 'family', 'network', 'Bash', 'x', '', 'blocked')`, now.Add(-time.Minute).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if err := backup.Record(l, now.Add(-3*time.Hour), backup.Result{Archive: "/b/a.tar.gz", Bytes: 1e6}, nil); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: now, asked: make(chan time.Duration, 1), firing: make(chan time.Time)}
	out := make(notices, 1)
	d := &Daily{Hour: 7, Minute: 30, Loc: tokyo, DB: db, Layout: l, WhatsApp: conn{now.Add(-5 * time.Hour)}, Tell: out, Clock: clock}
	go d.Run(ctx)
	if wait := <-clock.asked; wait != 30*time.Minute {
		t.Fatalf("waits %v for 07:30 in Tokyo at 07:00 there, want 30m", wait)
	}
	clock.now = now.Add(30 * time.Minute)
	clock.firing <- clock.now
	text := <-out
	for _, want := range []string{"Fri 27 Nov 07:30", "• family: 3 runs, 1 failed", "Violations: family 1", "Last backup: ok at", "/b/a.tar.gz", "WhatsApp: connected for 5h 30m"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "old") {
		t.Errorf("a run of two days ago is counted:\n%s", text)
	}
	if wait := <-clock.asked; wait != 24*time.Hour {
		t.Errorf("next summary in %v, want 24h", wait)
	}
}
