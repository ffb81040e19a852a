package alerts

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// claimKey marks key in done_keys (the daemon's table of side effects done
// once) and says whether it was new, as the IPC watcher's adapter does.
func claimKey(key string) func(tx *sql.Tx) (bool, error) {
	return func(tx *sql.Tx) (bool, error) {
		res, err := tx.Exec(`INSERT OR IGNORE INTO done_keys (key, done_at) VALUES (?, ?)`, key, time.Now().UnixMilli())
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n > 0, err
	}
}

// A refused IPC file is finished again after a restart; the repeat must
// neither alert nor audit twice.
func TestRecordOnceRepeatedDoesNothingNew(t *testing.T) {
	e := newEnv(t, "", 0, nil, false)
	ctx := context.Background()
	v := netViolation("family", "ipc/family")
	for range 3 {
		if err := e.rep.RecordOnce(ctx, v, true, claimKey("ipc-7")); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM violations`); n != 1 {
		t.Errorf("%d audit rows, want 1", n)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != 1 {
		t.Errorf("%d alerts queued, want 1", n)
	}
	if lines := readLines(t, filepath.Join(e.groupsDir, "family", "logs", "security.jsonl")); len(lines) != 1 {
		t.Errorf("%d audit lines, want 1", len(lines))
	}
	// Another key is another violation; audit-only records no alert.
	if err := e.rep.RecordOnce(ctx, v, false, claimKey("ipc-8")); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM violations`); n != 2 {
		t.Errorf("%d audit rows, want 2", n)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != 1 {
		t.Errorf("%d alerts queued, want 1", n)
	}
}

// A claim that fails records nothing, so the caller's retry starts clean.
func TestRecordOnceFailedClaimRecordsNothing(t *testing.T) {
	e := newEnv(t, "", 0, nil, false)
	boom := errors.New("boom")
	err := e.rep.RecordOnce(context.Background(), netViolation("family", "x"), true, func(tx *sql.Tx) (bool, error) {
		if _, err := tx.Exec(`INSERT INTO done_keys (key, done_at) VALUES ('k', 1)`); err != nil {
			return false, err
		}
		return false, boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want it to wrap the claim's", err)
	}
	for _, table := range []string{"violations", "outbox", "done_keys"} {
		if n := e.count(t, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%d rows in %s, want 0", n, table)
		}
	}
}
