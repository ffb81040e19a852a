package daemon

import (
	"context"

	"github.com/nanoclawd/nanoclawd/internal/metrics"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// metricsParts are the daemon's parts a scrape reads; the router is read
// at scrape time (the metrics are made before it, which reports to them).
func (d *Daemon) metricsParts() metrics.Parts {
	return metrics.Parts{Channels: &d.channels, DB: d.db, Outbox: d.outbox, Groups: d.reg, Usage: d.usage,
		Standbys: func() int { return len(d.router.Standbys()) },
		Health:   func(ctx context.Context) ([]usage.Health, error) { return usage.HealthOf(ctx, d.db) },
	}
}
