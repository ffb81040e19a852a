package alerts

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// BenchmarkViolationToAlert measures the time from Report to the alert
// reaching the channel's Send, through SQLite, the outbox and its wake-up
// (the audit line's fsync runs alongside the send).
func BenchmarkViolationToAlert(b *testing.B) {
	e := newEnv(b, "", time.Minute, nil, true)
	ctx := context.Background()
	sentAt := make(chan time.Time, 1)
	e.rec.Refuse(func(channel.Outgoing) error { sentAt <- time.Now(); return nil })
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		// A new target each time: every violation is a first alert.
		if err := e.rep.Report(ctx, netViolation("family", fmt.Sprintf("h%d.example", i))); err != nil {
			b.Fatal(err)
		}
		e.rec.Next(b)
		lat = append(lat, (<-sentAt).Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
