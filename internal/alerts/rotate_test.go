package alerts

// The audit log rotates at auditMax, keeping auditKeep old files, and a
// link the group planted among them is moved, never followed.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAuditLogRotates(t *testing.T) {
	e := newEnv(t, "", time.Minute, nil, false)
	ctx := context.Background()
	logs := filepath.Join(e.groupsDir, "family", "logs")
	if err := os.MkdirAll(logs, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(logs, "security.jsonl")
	for i := 1; i <= auditKeep; i++ {
		if err := os.WriteFile(fmt.Sprintf("%s.%d", path, i), []byte(fmt.Sprintf("old %d\n", i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The group's own link among the old files: renamed like a file.
	canary := filepath.Join(t.TempDir(), "canary")
	if err := os.WriteFile(canary, []byte("canary\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(path + ".2")
	if err := os.Symlink(canary, path+".2"); err != nil {
		t.Fatal(err)
	}
	full := strings.Repeat("x", auditMax-10) + "\n"
	if err := os.WriteFile(path, []byte(full), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.rep.Report(ctx, netViolation("family", "after.example")); err != nil {
		t.Fatal(err)
	}
	if lines := readLines(t, path); len(lines) != 1 || !strings.Contains(lines[0], "after.example") {
		t.Errorf("the new log holds %d lines, want the one new line", len(lines))
	}
	if fi, err := os.Stat(path + ".1"); err != nil || fi.Size() != int64(len(full)) {
		t.Errorf("security.jsonl.1 is not the full old log: %v", err)
	}
	if fi, err := os.Lstat(path + ".3"); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the planted link was not moved along as a link: %v", err)
	}
	if b, _ := os.ReadFile(canary); string(b) != "canary\n" {
		t.Errorf("the link's target was written: %q", b)
	}
	for i := 2; i <= auditKeep; i++ {
		want := fmt.Sprintf("old %d\n", i-1)
		if i == 3 {
			continue // the link
		}
		if b, _ := os.ReadFile(fmt.Sprintf("%s.%d", path, i)); string(b) != want {
			t.Errorf("security.jsonl.%d = %q, want %q", i, b, want)
		}
	}
	if _, err := os.Stat(fmt.Sprintf("%s.%d", path, auditKeep+1)); err == nil {
		t.Errorf("more than %d old logs kept", auditKeep)
	}
}

// A batch of refusals is written as one append, in order.
func TestAuditLinesOfABatchInOrder(t *testing.T) {
	e := newEnv(t, "", time.Minute, nil, false)
	ctx := context.Background()
	tx, err := e.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := e.rep.RecordTx(ctx, tx, ipcViolation("family", i), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := e.rep.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, filepath.Join(e.groupsDir, "family", "logs", "security.jsonl"))
	if len(lines) != 300 {
		t.Fatalf("%d lines, want 300", len(lines))
	}
	for i, l := range lines {
		if !strings.Contains(l, fmt.Sprintf("f%06d.json", i)) {
			t.Fatalf("line %d out of order: %s", i, l)
		}
	}
	if n := e.count(t, `SELECT count(*) FROM violations WHERE logged = 0`); n != 0 {
		t.Errorf("%d rows left unmarked", n)
	}
}
