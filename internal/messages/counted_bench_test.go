package messages

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// BenchmarkAddCounted stores messages in two databases in turns, one
// keeping the running total /metrics reads (the trigger of
// migrations/0020_counters.sql), one without it: what counting costs on
// the way from a message to its agent, under the same load. It reports
// the median of each and their ratio.
func BenchmarkAddCounted(b *testing.B) {
	ctx := context.Background()
	var stores [2]*Store
	for i := range stores {
		db, err := store.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		if i == 1 {
			if _, err := db.ExecContext(ctx, `DROP TRIGGER counters_received`); err != nil {
				b.Fatal(err)
			}
		}
		stores[i] = New(db)
	}
	var took [2][]time.Duration
	n := 0
	for b.Loop() {
		n++
		for i, s := range stores {
			t0 := time.Now()
			if _, _, err := s.Add(ctx, channel.Message{ChatJID: chat, ID: strconv.Itoa(n), SenderJID: "ann@local", Text: "how is the weather",
				Time: time.Now()}, ""); err != nil {
				b.Fatal(err)
			}
			took[i] = append(took[i], time.Since(t0))
		}
	}
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	counted, plain := median(took[0]), median(took[1])
	b.ReportMetric(counted, "counted-µs")
	b.ReportMetric(plain, "plain-µs")
	b.ReportMetric(counted/plain, "ratio")
}
