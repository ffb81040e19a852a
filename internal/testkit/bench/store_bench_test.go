package bench

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// BenchmarkInboundStored: a message POSTed to the local channel → its 202,
// which the daemon answers once the message is stored. The same daemon
// runs rounds with the search index kept up (in batches, beside the
// burst) and without it, in turns, so the two figures meet the same
// machine load; indexed/plain (of the medians) is what the index costs
// each inbound message.
func BenchmarkInboundStored(b *testing.B) {
	in := e2e.New(b, e2e.Options{Wait: 30 * time.Second})
	in.AddGroup("local:family", "family") // needs the trigger: messages are only stored
	in.Start()
	db, err := sql.Open("sqlite3", store.DSN(in.Layout().DB()))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	// Without the index: the mark set past every message, so the daemon
	// indexes nothing; back with it, the mark where it was, so the next
	// indexed round also indexes the plain round's messages.
	var mark int64
	state := true
	setIndex := func(on bool) {
		if on == state {
			return
		}
		state = on
		var err error
		if on {
			_, err = db.Exec(`UPDATE messages_fts_mark SET seq = ?`, mark)
		} else if err = db.QueryRow(`SELECT seq FROM messages_fts_mark`).Scan(&mark); err == nil {
			_, err = db.Exec(`UPDATE messages_fts_mark SET seq = 1000000000000`)
		}
		if err != nil {
			b.Fatal(err)
		}
	}

	words := []string{"plumber", "tomorrow", "boiler", "dinner", "school", "photos", "garden", "tickets", "Tuesday", "grandma"}
	var indexed, plain []time.Duration
	n := 0
	for round := range 16 {
		on := round%2 == 0
		setIndex(on)
		for range 250 {
			n++
			text := fmt.Sprintf("message %d: who fixes the %s before %s? ask about the %s and the %s",
				n, words[n%10], words[(n/10)%10], words[(n/3)%10], words[(n/7)%10])
			t0 := time.Now()
			if _, err := in.Local.Post(context.Background(), local.Message{ChatJID: "local:family", Sender: "ann@local", SenderName: "Ann", Text: text}); err != nil {
				b.Fatal(err)
			}
			if d := time.Since(t0); on {
				indexed = append(indexed, d)
			} else {
				plain = append(plain, d)
			}
		}
	}
	setIndex(true)
	// The index's own work, off the inbound path: the messages not yet
	// indexed (a burst's, which the daemon indexes once it pauses), by
	// the same code, timed here.
	var behind int64
	db.QueryRow(`SELECT count(*) FROM messages WHERE seq > (SELECT seq FROM messages_fts_mark)`).Scan(&behind)
	t0 := time.Now()
	if err := messages.New(store.Wrap(db)).Index(context.Background()); err != nil {
		b.Fatal(err)
	}
	if behind > 0 {
		b.ReportMetric(float64(time.Since(t0).Microseconds())/float64(behind), "index-us/msg")
	}
	mean := func(l []time.Duration) float64 {
		var s time.Duration
		for _, d := range l {
			s += d
		}
		return float64(s.Microseconds()) / 1000 / float64(len(l))
	}
	median := func(l []time.Duration) float64 {
		l = slices.Clone(l)
		slices.Sort(l)
		return float64(l[len(l)/2].Microseconds()) / 1000
	}
	b.ReportMetric(mean(indexed), "indexed-mean-ms")
	b.ReportMetric(mean(plain), "plain-mean-ms")
	b.ReportMetric(median(plain), "plain-p50-ms")
	b.ReportMetric(median(indexed)/median(plain), "indexed/plain")
	percentiles(b, indexed)
}
