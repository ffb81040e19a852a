package sessions_test

import (
	"context"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/sessions"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// A run that started before a reset cannot bring its session back; one
// that started after it can.
func TestSaveRespectsReset(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := time.Now().Add(-time.Second)
	if ok, err := sessions.Save(ctx, db, "fam", "s1", before); !ok || err != nil {
		t.Fatalf("first save: %v %v", ok, err)
	}
	if id, _ := sessions.Get(ctx, db, "fam"); id != "s1" {
		t.Fatalf("Get = %q", id)
	}
	at, err := sessions.Reset(ctx, db, "fam")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := sessions.Save(ctx, db, "fam", "s2", before); ok || err != nil {
		t.Fatalf("a run from before the reset saved its session: %v %v", ok, err)
	}
	if id, _ := sessions.Get(ctx, db, "fam"); id != "" {
		t.Fatalf("after reset Get = %q", id)
	}
	if ok, err := sessions.Save(ctx, db, "fam", "s3", at); !ok || err != nil {
		t.Fatalf("a run from after the reset: %v %v", ok, err)
	}
	if id, _ := sessions.Get(ctx, db, "fam"); id != "s3" {
		t.Fatalf("Get = %q", id)
	}
}
