package alerts

// The audit log: lines a crash left unwritten, each written once.

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/groupfstest"
)

func readLines(t testing.TB, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func TestReplayWritesMissedAuditLines(t *testing.T) {
	e := newEnv(t, "", time.Minute, nil, false)
	ctx := context.Background()
	if err := e.rep.Report(ctx, netViolation("family", "a.example")); err != nil {
		t.Fatal(err)
	}
	// As if the daemon died after the commit and before the line.
	path := filepath.Join(e.groupsDir, "family", "logs", "security.jsonl")
	os.Remove(path)
	e.db.ExecContext(ctx, `UPDATE violations SET logged = 0`)
	if err := e.rep.replayLog(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.rep.replayLog(ctx); err != nil {
		t.Fatal(err)
	}
	if lines := readLines(t, path); len(lines) != 1 || !strings.Contains(lines[0], "a.example") {
		t.Errorf("after replay: %q", lines)
	}
}

// A crash after the audit line was written but before its row was marked
// written: the replay at the next start does not write the line twice,
// and still writes one that is missing.
func TestAuditReplayWritesEachLineOnce(t *testing.T) {
	e := newEnv(t, "", time.Minute, nil, false)
	ctx := context.Background()
	for _, target := range []string{"a.example", "b.example"} {
		if err := e.rep.Report(ctx, netViolation("family", target)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(e.groupsDir, "family", "logs", "security.jsonl")
	lines := readLines(t, path)
	// As if the crash came after a.example's line, and before b.example's.
	os.WriteFile(path, []byte(lines[0]+"\n"), 0o600)
	if _, err := e.db.ExecContext(ctx, `UPDATE violations SET logged = 0`); err != nil {
		t.Fatal(err)
	}
	if err := e.rep.replayLog(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readLines(t, path); len(got) != 2 || got[0] != lines[0] || got[1] != lines[1] {
		t.Errorf("after the replay:\n%s", strings.Join(got, "\n"))
	}
}

// A group that made its logs/ (or security.jsonl) a link into a host
// directory does not get the daemon's audit lines written there: the link
// is removed and recorded as a violation of its own, and both lines land
// in the real logs/.
func TestAuditLogDoesNotFollowLinks(t *testing.T) {
	for _, at := range []string{"logs", "logs/security.jsonl"} {
		t.Run(at, func(t *testing.T) {
			e := newEnv(t, "", time.Minute, nil, false)
			c := groupfstest.NewCanary(t)
			target := c.Dir
			if at != "logs" {
				target = filepath.Join(c.Dir, "notes.txt")
			}
			link := filepath.Join(e.groupsDir, "family", filepath.FromSlash(at))
			c.Link(t, link, target)
			if err := e.rep.Report(context.Background(), netViolation("family", "a.example")); err != nil {
				t.Fatal(err)
			}
			c.Intact(t)
			lines := readLines(t, filepath.Join(e.groupsDir, "family", "logs", "security.jsonl"))
			all := strings.Join(lines, "\n")
			if len(lines) != 2 || !strings.Contains(all, `"kind":"filesystem"`) || !strings.Contains(all, "a.example") {
				t.Errorf("audit lines %q; want the network violation and the link's", lines)
			}
			if n := e.count(t, `SELECT count(*) FROM violations WHERE kind = 'filesystem' AND target = ? AND action = 'blocked'`, link); n != 1 {
				t.Errorf("%d violation rows for the link, want 1", n)
			}
		})
	}
}
