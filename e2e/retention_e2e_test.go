package e2e_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// TestRetentionPrunesUsage: with retention.usage "1d", usage rows
// backdated two days are gone after the next pruning (the one at start),
// recent ones stay, and status shows the database's size on a line of its
// own.
func TestRetentionPrunesUsage(t *testing.T) {
	in := e2e.New(t, e2e.Options{Top: `"retention": {"usage": "1d"}`})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	p.Kill9()

	db, err := store.OpenFile(in.Layout().DB())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, at := range []time.Time{time.Now().Add(-49 * time.Hour), time.Now().Add(-48 * time.Hour), time.Now().Add(-time.Hour)} {
		if _, err := db.ExecContext(context.Background(), `INSERT INTO usage_requests (at, group_folder, run_id, model, input_tokens, output_tokens,
			cache_write_tokens, cache_read_tokens, cost_usd, priced) VALUES (?, 'main', ?, 'claude-sonnet-4-5', 10, 10, 0, 0, 0.01, 1)`,
			at.UnixMilli(), i); err != nil {
			t.Fatal(err)
		}
	}
	in.Start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var old, recent int
		db.QueryRowContext(context.Background(), `SELECT count(*) FROM usage_requests WHERE at < ?`, time.Now().Add(-24*time.Hour).UnixMilli()).Scan(&old)
		db.QueryRowContext(context.Background(), `SELECT count(*) FROM usage_requests WHERE at >= ?`, time.Now().Add(-24*time.Hour).UnixMilli()).Scan(&recent)
		if old == 0 && recent == 1 {
			break
		}
		if time.Now().After(deadline) || recent != 1 {
			t.Fatalf("after the pruning at start: %d old usage rows left, %d recent (want 0 and 1)", old, recent)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out := in.CLI("status"); !regexp.MustCompile(`(?m)^database: \d+\.\d MiB$`).MatchString(out) {
		t.Errorf("status has no line \"database: N.N MiB\":\n%s", out)
	}
}
