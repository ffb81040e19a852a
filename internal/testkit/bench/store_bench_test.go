package bench

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// BenchmarkInboundStored: a message POSTed to the local channel → its 202,
// which the daemon answers once the message is stored (and, with the
// search index, indexed in the same transaction). The same daemon runs
// rounds with the index's triggers in place and dropped, in turns, so the
// two figures meet the same machine load; indexed/plain is what the index
// costs each inbound message.
func BenchmarkInboundStored(b *testing.B) {
	in := e2e.New(b, e2e.Options{Wait: 30 * time.Second})
	in.AddGroup("local:family", "family") // needs the trigger: messages are only stored
	in.Start()
	db, err := sql.Open("sqlite3", store.DSN(in.Layout().DB()))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	triggers := map[string]string{}
	rows, err := db.Query(`SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages' AND name GLOB 'messages_fts_*'`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var name, def string
		rows.Scan(&name, &def)
		triggers[name] = def
	}
	rows.Close()
	if len(triggers) != 3 {
		b.Fatalf("found the index triggers %v, want 3", triggers)
	}
	state := true
	setIndex := func(on bool) {
		if on == state {
			return
		}
		state = on
		for name, def := range triggers {
			q := `DROP TRIGGER IF EXISTS ` + name
			if on {
				q = def
			}
			if _, err := db.Exec(q); err != nil {
				b.Fatal(err)
			}
		}
	}

	words := []string{"plumber", "tomorrow", "boiler", "dinner", "school", "photos", "garden", "tickets", "Tuesday", "grandma"}
	var indexed, plain []time.Duration
	n := 0
	for round := range 8 {
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
	mean := func(l []time.Duration) float64 {
		var s time.Duration
		for _, d := range l {
			s += d
		}
		return float64(s.Microseconds()) / 1000 / float64(len(l))
	}
	b.ReportMetric(mean(indexed), "indexed-mean-ms")
	b.ReportMetric(mean(plain), "plain-mean-ms")
	b.ReportMetric(mean(indexed)/mean(plain), "indexed/plain")
	percentiles(b, indexed)
}
