package daemon

import (
	"context"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/ipc"
	"github.com/nanoclawd/nanoclawd/internal/metrics"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// metricsParts are the daemon's parts a scrape reads; the router is read
// at scrape time (the metrics are made before it, which reports to them).
func (d *Daemon) metricsParts() metrics.Parts {
	return metrics.Parts{Channels: &d.channels, Messages: d.messages, Outbox: d.outbox, Groups: d.reg, Usage: d.usage,
		Standbys: func() int { return len(d.router.Standbys()) },
		Decided:  func(ctx context.Context) (int64, int64, error) { return ipc.Decided(ctx, d.db) },
		Violations: func(ctx context.Context) (map[string]map[string]int, error) {
			return alerts.CountViolations(ctx, d.db, time.Unix(0, 0))
		},
		Health: func(ctx context.Context) ([]usage.Health, error) { return usage.HealthOf(ctx, d.db) },
	}
}
