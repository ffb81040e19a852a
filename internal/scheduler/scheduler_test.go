package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/store"
)

func TestScheduleArithmetic(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no tzdata:", err)
	}
	now := time.Date(2026, 3, 10, 8, 30, 0, 0, time.UTC) // 09:30 in Berlin
	tests := []struct {
		name, typ, value string
		want             time.Time
	}{
		{"cron in the configured zone", "cron", "0 10 * * *", time.Date(2026, 3, 10, 9, 0, 0, 0, time.UTC)},
		{"cron tomorrow", "cron", "0 9 * * *", time.Date(2026, 3, 11, 8, 0, 0, 0, time.UTC)},
		{"descriptor", "cron", "@daily", time.Date(2026, 3, 10, 23, 0, 0, 0, time.UTC)},
		{"interval", "interval", "3600000", now.Add(time.Hour)},
		{"once local", "once", "2026-03-10T12:00:00", time.Date(2026, 3, 10, 11, 0, 0, 0, time.UTC)},
		{"once in the past runs now", "once", "2020-01-01T00:00:00", now},
	}
	for _, tc := range tests {
		got, err := First(tc.typ, tc.value, berlin, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("%s: First(%s %q) = %v, %v; want %v", tc.name, tc.typ, tc.value, got, err, tc.want)
		}
	}
}

func TestIntervalSkipsMissedRuns(t *testing.T) {
	prev := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	now := prev.Add(3*time.Hour + 20*time.Minute) // down for three runs
	next, ok, err := After("interval", "3600000", time.UTC, prev, now)
	if err != nil || !ok || !next.Equal(prev.Add(4*time.Hour)) {
		t.Fatalf("After = %v %v %v; want %v (anchored, missed runs skipped)", next, ok, err, prev.Add(4*time.Hour))
	}
	next, _, _ = After("interval", "3600000", time.UTC, prev, prev.Add(time.Minute))
	if !next.Equal(prev.Add(time.Hour)) {
		t.Fatalf("on-time run: next = %v", next)
	}
	if _, ok, _ := After("once", "2026-01-01T10:00:00", time.UTC, prev, now); ok {
		t.Fatal("a once task has no next run")
	}
}

func TestInvalidSchedulesSayHowToFix(t *testing.T) {
	tests := []struct{ typ, value, hint string }{
		{"cron", "61 * * * *", "5 fields"},
		{"cron", "* * *", "5 fields"},
		{"cron", "TZ=UTC 0 9 * * *", "configured timezone"},
		{"cron", "", "5 fields"},
		{"interval", "abc", "milliseconds"},
		{"interval", "-5", "milliseconds"},
		{"interval", "1000", "one minute"},
		{"once", "2026-01-01 10:00", "YYYY-MM-DDTHH:MM:SS"},
		{"once", "2026-01-01T10:00:00Z", "YYYY-MM-DDTHH:MM:SS"},
		{"weekly", "x", "cron, interval or once"},
	}
	for _, tc := range tests {
		err := Validate(tc.typ, tc.value)
		if !errors.Is(err, ErrSchedule) || !strings.Contains(err.Error(), tc.hint) {
			t.Errorf("Validate(%s, %q) = %v; want ErrSchedule mentioning %q", tc.typ, tc.value, err, tc.hint)
		}
	}
}

// enqueued is a stand-in queue that passes on the ids it is given.
type enqueued chan string

func (e enqueued) EnqueueTask(folder, taskID string) {
	if e != nil {
		e <- taskID
	}
}

func newScheduler(t *testing.T, r Enqueuer) (*Scheduler, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return New(db, time.UTC, r, nil, zerolog.Nop()), dir
}

// change runs f in a transaction of its own, committed when f succeeds,
// as the IPC journal runs a task change in the file's.
func change(t *testing.T, s *Scheduler, f func(tx *store.Tx) error) error {
	t.Helper()
	tx, err := s.db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// create stores nt in a transaction of its own.
func create(t *testing.T, s *Scheduler, nt NewTask) (Task, error) {
	t.Helper()
	var task Task
	err := change(t, s, func(tx *store.Tx) error {
		var err error
		task, err = s.Create(context.Background(), tx, nt)
		return err
	})
	return task, err
}

func TestDueTaskRunsThroughRunnerAndIsLogged(t *testing.T) {
	ran := make(enqueued, 4)
	s, _ := newScheduler(t, ran)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)

	task, err := create(t, s, NewTask{GroupFolder: "family", ChatJID: "1@g.us", Prompt: "water the plants",
		ScheduleType: TypeOnce, ScheduleValue: "2000-01-01T00:00:00", ContextMode: ContextIsolated})
	if err != nil {
		t.Fatal(err)
	}
	s.Changed()
	select {
	case id := <-ran:
		if got, err := s.Get(ctx, id); err != nil || id != task.ID || got.Prompt != "water the plants" || got.ChatJID != "1@g.us" {
			t.Fatalf("ran %s: %+v %v", id, got, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("due task never ran")
	}
	if err := s.Done(ctx, task.ID, "done: plants watered", nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, task.ID)
	if err != nil || got.Status != StatusCompleted || got.NextRun != nil || got.LastResult != "done: plants watered" || got.LastRun == nil {
		t.Fatalf("after run: %+v %v", got, err)
	}
	runs, err := s.Runs(ctx, task.ID)
	if err != nil || len(runs) != 1 || runs[0].Status != "success" || runs[0].FinishedAt == nil {
		t.Fatalf("run log %+v %v", runs, err)
	}
	select {
	case again := <-ran:
		t.Fatalf("a once task ran twice: %+v", again)
	default:
	}
}

func TestPauseResumeCancelUpdate(t *testing.T) {
	s, _ := newScheduler(t, enqueued(nil))
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	task, err := create(t, s, NewTask{GroupFolder: "family", ChatJID: "1@g.us", Prompt: "p",
		ScheduleType: TypeCron, ScheduleValue: "0 9 * * *"})
	if err != nil {
		t.Fatal(err)
	}
	if task.ContextMode != ContextGroup {
		t.Fatalf("context mode defaults to group, got %q", task.ContextMode)
	}
	if err := change(t, s, func(tx *store.Tx) error { return s.Pause(ctx, tx, task.ID) }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, task.ID); got.Status != StatusPaused {
		t.Fatalf("status %q", got.Status)
	}
	if err := change(t, s, func(tx *store.Tx) error { return s.Resume(ctx, tx, task.ID) }); err != nil {
		t.Fatal(err)
	}
	prompt, typ, val := "new prompt", TypeInterval, "7200000"
	if err := change(t, s, func(tx *store.Tx) error {
		return s.Update(ctx, tx, task.ID, Update{Prompt: &prompt, ScheduleType: &typ, ScheduleValue: &val})
	}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, task.ID)
	if got.Status != StatusActive || got.Prompt != prompt || got.NextRun == nil || !got.NextRun.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("after update: %+v", got)
	}
	bad := "every day"
	if err := change(t, s, func(tx *store.Tx) error { return s.Update(ctx, tx, task.ID, Update{ScheduleValue: &bad}) }); !errors.Is(err, ErrSchedule) {
		t.Fatalf("bad update: %v", err)
	}
	if err := change(t, s, func(tx *store.Tx) error { return s.Cancel(ctx, tx, task.ID) }); err != nil {
		t.Fatal(err)
	}
	if err := change(t, s, func(tx *store.Tx) error { return s.Resume(ctx, tx, task.ID) }); !errors.Is(err, ErrFinished) {
		t.Fatalf("resume after cancel: %v", err)
	}
	if err := change(t, s, func(tx *store.Tx) error { return s.Pause(ctx, tx, "task-nope") }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pause unknown: %v", err)
	}
}

// observed counts the scheduler's TasksChanged calls.
type observed chan struct{}

func (o observed) TasksChanged(context.Context) { o <- struct{}{} }

// A change made through the scheduler reaches its observer (the agents'
// current_tasks.json files).
func TestChangedTellsTheObserver(t *testing.T) {
	s, _ := newScheduler(t, enqueued(nil))
	obs := make(observed, 8)
	s.observer = obs
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	if _, err := create(t, s, NewTask{GroupFolder: "family", ChatJID: "1@g.us", Prompt: "p",
		ScheduleType: TypeInterval, ScheduleValue: "600000", ContextMode: ContextIsolated}); err != nil {
		t.Fatal(err)
	}
	s.Changed()
	select {
	case <-obs:
	case <-time.After(10 * time.Second):
		t.Fatal("the observer was not told of the change")
	}
}
