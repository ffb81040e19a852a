package summary

import (
	"context"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/backup"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// Clock is the time the summary goes by; tests inject one.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Spender is the model usage per group since a time (the relay's usage
// store; nil: the summary says "Spend: not counted").
type Spender interface {
	SpendSince(ctx context.Context, since time.Time) (map[string]usage.Total, error)
}

// Connection is the WhatsApp channel as the summary reads it.
type Connection interface {
	Connection() (connected bool, since time.Time)
}

// Notifier queues a message for the main chat (the outbox).
type Notifier interface {
	TellMain(ctx context.Context, text string)
}

// Daily sends the summary every day at Hour:Minute in Loc.
type Daily struct {
	Hour, Minute int
	Loc          *time.Location
	DB           *store.DB
	Layout       layout.Layout
	WhatsApp     Connection // nil: WhatsApp is not enabled
	Spend        Spender    // nil: spend is not counted (see Spender)
	Tell         Notifier
	Clock        Clock // nil: real time
	Log          zerolog.Logger
}

// Run sends a summary at each day's time until ctx ends. A time missed
// while the daemon was down is not made up.
func (d *Daily) Run(ctx context.Context) error {
	clock := d.Clock
	if clock == nil {
		clock = realClock{}
	}
	for {
		now := clock.Now()
		at := Next(now, d.Hour, d.Minute, d.Loc)
		select {
		case <-ctx.Done():
			return nil
		case <-clock.After(at.Sub(now)):
		}
		f, err := d.Gather(ctx, at)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			d.Log.Error().Err(err).Msg("daily summary")
			continue
		}
		d.Tell.TellMain(ctx, Text(f))
	}
}

// Gather collects the facts of the 24 hours before at.
func (d *Daily) Gather(ctx context.Context, at time.Time) (Facts, error) {
	since := at.Add(-24 * time.Hour)
	f := Facts{At: at.In(d.Loc), Violations: map[string]int{}}
	var err error
	if f.Runs, err = runner.RunCounts(ctx, d.DB, since); err != nil {
		return f, err
	}
	counts, err := alerts.CountViolations(ctx, d.DB, since)
	if err != nil {
		return f, err
	}
	for g, kinds := range counts {
		for _, n := range kinds {
			f.Violations[g] += n
		}
	}
	if d.Spend != nil {
		if f.Spend, err = d.Spend.SpendSince(ctx, since); err != nil {
			return f, err
		}
	}
	last, ok, err := backup.ReadLast(d.Layout)
	if err != nil {
		d.Log.Warn().Err(err).Msg("daily summary: last backup")
	} else if ok {
		f.LastBackup = &last
	}
	if d.WhatsApp != nil {
		f.Link.Enabled = true
		f.Link.Connected, f.Link.Since = d.WhatsApp.Connection()
	}
	return f, nil
}
