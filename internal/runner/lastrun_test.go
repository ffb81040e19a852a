package runner

import (
	"context"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Runs are counted by hour, and a group's counts older than a week go
// when it runs again: a daemon left alone for months keeps a small table.
func TestRunCountsArePruned(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	for _, r := range []LastRun{
		{Folder: "family", Finished: now.Add(-30 * 24 * time.Hour), OK: true},
		{Folder: "work", Finished: now.Add(-30 * 24 * time.Hour), OK: true},
		{Folder: "family", Finished: now.Add(-2 * time.Hour), OK: false},
		{Folder: "family", Finished: now, OK: true},
	} {
		r.Started = r.Finished
		if err := RecordLastRun(ctx, db, r); err != nil {
			t.Fatal(err)
		}
	}
	counts, err := RunCounts(ctx, db, now.Add(-60*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if counts["family"] != (RunCount{Runs: 2, Failures: 1}) || counts["work"] != (RunCount{Runs: 1}) {
		t.Errorf("counts %+v; want family's month-old run forgotten (2 runs, 1 failure), work's kept until it runs again", counts)
	}
}

// A group's last run is the one that finished last, whatever order the
// outcomes are recorded in; a shutdown's stop is kept as such.
func TestLastRunIsTheNewest(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().Truncate(time.Millisecond)
	for _, r := range []LastRun{
		{Folder: "main", Finished: now, OK: true},
		{Folder: "main", Finished: now.Add(-time.Hour), Error: "stale failure"},
		{Folder: "family", Finished: now.Add(-time.Hour), Error: "boom"},
		{Folder: "family", Finished: now, OK: true, Stopped: true},
	} {
		r.Started = r.Finished.Add(-time.Minute)
		if err := RecordLastRun(ctx, db, r); err != nil {
			t.Fatal(err)
		}
	}
	last, err := LastRuns(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if r := last["main"]; !r.OK || r.Error != "" || !r.Finished.Equal(now) {
		t.Errorf("main's last run %+v: the stale failure recorded after it hid the success", r)
	}
	if r := last["family"]; !r.Stopped || !r.OK || r.Error != "" {
		t.Errorf("family's last run %+v, want the stop", r)
	}
	// Each run counts for /metrics, the stale one too.
	runs := map[string]int{}
	rows, err := db.QueryContext(ctx, `SELECT key, n FROM counters WHERE name = 'runs'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			t.Fatal(err)
		}
		runs[key] = n
	}
	if runs["ok"] != 2 || runs["error"] != 2 {
		t.Errorf("runs counted %v, want 2 ok and 2 error", runs)
	}
}
