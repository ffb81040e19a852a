package backup

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

type notices chan string

func (n notices) TellMain(_ context.Context, text string) { n <- text }

// With no backup recorded the first is made at once, recorded, and the
// next is due Every later; one that fails is recorded and told.
func TestScheduleRuns(t *testing.T) {
	src := install(t)
	dir := t.TempDir()
	s := &Schedule{Source: src, Dir: dir, Every: time.Hour, Keep: 2, Tell: make(notices, 1), Log: zerolog.Nop()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		next := s.Next()
		if next != nil && time.Until(*next) > 50*time.Minute {
			break // the first backup is done and the next one planned
		}
		if time.Now().After(deadline) {
			t.Fatal("no scheduled backup was made")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	last, ok, err := ReadLast(src.Layout)
	if err != nil || !ok || !last.OK || !last.Verified {
		t.Fatalf("recorded %+v, %v, %v", last, ok, err)
	}
	if _, err := os.Stat(last.Archive); err != nil {
		t.Errorf("the recorded archive: %v", err)
	}

	// The directory cannot be written: recorded as failed, the owner told.
	blocked := t.TempDir() + "/file"
	os.WriteFile(blocked, nil, 0o600)
	tell := make(notices, 1)
	s = &Schedule{Source: src, Dir: blocked, Every: time.Hour, Keep: 2, Tell: tell, Log: zerolog.Nop()}
	os.Remove(src.Layout.LastBackup())
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	select {
	case text := <-tell:
		if last, _, _ := ReadLast(src.Layout); last.OK || last.Error == "" {
			t.Errorf("failure recorded as %+v", last)
		}
		if want := "[BACKUP FAILED]"; len(text) < len(want) || text[:len(want)] != want {
			t.Errorf("told %q", text)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a failed scheduled backup was not told")
	}
}
