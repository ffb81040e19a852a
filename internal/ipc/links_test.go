package ipc

// A group's agent replaces the directories of its IPC dir with links to a
// host directory (the canary). The watcher's pruning, chmod, scans and
// verdicts must not touch the canary through them: each link is removed,
// reported once as a filesystem violation, and the group goes on working.

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/testkit/groupfstest"
)

// The verdict pruning deleted any file older than a minute in whatever
// results/ led to (nanoclaw.db included, if it led to the data dir).
func TestPruneDoesNotFollowAResultsLink(t *testing.T) {
	h := newHarness(t)
	c := groupfstest.NewCanary(t)
	c.Link(t, filepath.Join(h.root, "family", layout.ResultsDir))
	// A real results dir beside it, with an answer nobody took: pruned.
	stale := filepath.Join(h.root, "work", layout.ResultsDir, "old.json")
	os.MkdirAll(filepath.Dir(stale), 0o700)
	os.WriteFile(stale, []byte("{}"), 0o600)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)

	h.w.prune(context.Background())
	c.Intact(t)
	h.links.Reported(t, filepath.Join(h.root, "family", layout.ResultsDir))
	if _, err := os.Lstat(filepath.Join(h.root, "family", layout.ResultsDir)); !os.IsNotExist(err) {
		t.Errorf("the results link is still there: %v", err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale answer in a real results dir was not pruned: %v", err)
	}
}

// The rescan's chmod 0700 of tasks/ chmodded whatever tasks/ led to.
func TestRescanDoesNotChmodThroughATasksLink(t *testing.T) {
	h := newHarness(t)
	c := groupfstest.NewCanary(t)
	for _, sub := range []string{layout.TasksDir, layout.MessagesDir} {
		c.Link(t, filepath.Join(h.root, "family", sub))
	}
	h.start(t) // scans every group: the links are met at once
	groupfstest.WaitRealDir(t, filepath.Join(h.root, "family", layout.MessagesDir))
	h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "still here"))
	h.expectSend(t, "family", "family@g.us", "still here")
	c.Intact(t)
	for _, sub := range []string{layout.TasksDir, layout.MessagesDir} {
		groupfstest.IsRealDir(t, filepath.Join(h.root, "family", sub))
		h.links.Reported(t, filepath.Join(h.root, "family", sub))
	}
	if fi, _ := os.Stat(filepath.Join(h.root, "family", layout.TasksDir)); fi.Mode().Perm() != 0o700 {
		t.Errorf("the new tasks/ has mode %v, want 0700", fi.Mode().Perm())
	}
}

// A verdict is not written through a results link, and the request it
// answers is carried out.
func TestVerdictNotWrittenThroughAResultsLink(t *testing.T) {
	h := newHarness(t)
	c := groupfstest.NewCanary(t)
	c.Link(t, filepath.Join(h.root, "family", layout.ResultsDir))
	h.start(t)
	h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "answered"))
	h.expectSend(t, "family", "family@g.us", "answered")
	// The verdict follows the send: wait for the link to go.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if len(h.links.Got()) > 0 || time.Now().After(deadline) {
			break
		}
	}
	c.Intact(t)
	h.links.Reported(t, filepath.Join(h.root, "family", layout.ResultsDir))
}
