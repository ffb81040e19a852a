package alerts

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

// recordIn runs RecordTx in a transaction of its own that commits or not,
// as the IPC journal does with the record of a refused file.
func recordIn(t *testing.T, e *env, v security.Violation, alert, commit bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := e.rep.RecordTx(ctx, tx, v, alert); err != nil {
		t.Fatal(err)
	}
	if !commit {
		return
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := e.rep.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// A refused IPC file is audited and alerted with its journal row: once
// when the transaction commits, and Flush writes its audit line once.
func TestRecordTxCommitsWithTheCaller(t *testing.T) {
	e := newEnv(t, "", 0, nil, false)
	recordIn(t, e, netViolation("family", "ipc/family"), true, true)
	if err := e.rep.Flush(context.Background()); err != nil {
		t.Fatal(err)
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
	// Audit only: a row and a line, no alert.
	recordIn(t, e, netViolation("family", "ipc/family"), false, true)
	if n := e.count(t, `SELECT count(*) FROM violations`); n != 2 {
		t.Errorf("%d audit rows, want 2", n)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != 1 {
		t.Errorf("%d alerts queued, want 1", n)
	}
}

// A transaction that does not commit (the daemon died, or the journal
// rolled back) leaves no audit row, alert or line.
func TestRecordTxRolledBackRecordsNothing(t *testing.T) {
	e := newEnv(t, "", 0, nil, false)
	recordIn(t, e, netViolation("family", "x"), true, false)
	if err := e.rep.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"violations", "outbox"} {
		if n := e.count(t, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%d rows in %s, want 0", n, table)
		}
	}
	if _, err := os.Stat(filepath.Join(e.groupsDir, "family", "logs", "security.jsonl")); !os.IsNotExist(err) {
		t.Errorf("an audit line was written (%v)", err)
	}
}
