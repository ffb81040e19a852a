package backup

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Notifier tells the owner about a scheduled backup that failed (the
// outbox: a notice to the main chat).
type Notifier interface {
	TellMain(ctx context.Context, text string)
}

// Schedule makes a backup every Every into Dir, keeping Keep, while the
// daemon runs. The first is due Every after the last one recorded (at
// once if that is past, or none was made).
type Schedule struct {
	Source Source
	Dir    string
	Every  time.Duration
	Keep   int
	Tell   Notifier
	Log    zerolog.Logger

	mu  sync.Mutex
	due time.Time
}

// Next is when the next backup is due (nil when none is scheduled).
func (s *Schedule) Next() *time.Time {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.due.IsZero() {
		return nil
	}
	t := s.due
	return &t
}

// Run makes backups until ctx ends.
func (s *Schedule) Run(ctx context.Context) error {
	due := time.Now()
	if last, ok, err := ReadLast(s.Source.Layout); err == nil && ok && last.OK {
		due = last.Time.Add(s.Every)
	}
	for {
		s.mu.Lock()
		s.due = due
		s.mu.Unlock()
		t := time.NewTimer(time.Until(due))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		res, err := Create(ctx, s.Source, s.Dir, Options{Verify: true, Keep: s.Keep})
		if ctx.Err() != nil {
			return nil
		}
		if rerr := Record(s.Source.Layout, time.Now(), res, err); rerr != nil {
			s.Log.Warn().Err(rerr).Msg("backup")
		}
		if err != nil {
			s.Log.Error().Err(err).Msg("scheduled backup failed")
			s.Tell.TellMain(ctx, fmt.Sprintf("[BACKUP FAILED] the scheduled backup into %s failed: %v. "+
				"Run `nanoclawd backup --verify` to try it by hand.", s.Dir, err))
		} else {
			s.Log.Info().Str("archive", res.Archive).Int64("bytes", res.Bytes).Strs("pruned", res.Pruned).Msg("backup made")
		}
		due = time.Now().Add(s.Every)
	}
}
