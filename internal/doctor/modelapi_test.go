package doctor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// An upstream the relay recorded as not answering is a thing to fix until
// a request succeeds.
func TestModelAPINotAnswering(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := usage.NewStore(db)
	if r := ModelAPI(ctx, db); !r.OK {
		t.Errorf("nothing recorded: %+v", r)
	}
	h := usage.Health{Kind: usage.HealthDown, Status: 504, Detail: "not answering: nanoclaw relay: no model upstream answered (local/qwen: connection refused)", Since: time.Now()}
	if _, err := s.Problem(ctx, h, nil); err != nil {
		t.Fatal(err)
	}
	if r := ModelAPI(ctx, db); r.OK || !strings.Contains(unwrap(r), "local/qwen: connection refused") || !strings.Contains(r.String(), "agent.fallback") {
		t.Errorf("not answering: %s", r.String())
	}
	if err := s.Resolved(ctx, usage.HealthCredential, usage.HealthRate, usage.HealthDown); err != nil {
		t.Fatal(err)
	}
	if r := ModelAPI(ctx, db); !r.OK {
		t.Errorf("after a success: %s", r.String())
	}
}
