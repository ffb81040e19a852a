package ipc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

var drainedRE = regexp.MustCompile(`^(\d+) files deleted unread`)

// A backlog past pauseLimit pauses the group's IPC: the owner is told
// once, every file is drained unread and counted in the audit, other
// groups are served, and once the directory is empty the group's requests
// are carried out again.
func TestFloodPausesTheGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 10,500 files")
	}
	h := newHarness(t)
	const total = pauseLimit + 500
	dir := filepath.Join(h.root, "family", layout.MessagesDir)
	body := []byte(`{"type":"message","chatJid":"family@g.us","text":"flood","token":"forged"}`)
	for i := range total {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%06d.json", i)), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h.drop(t, "work", layout.MessagesDir, h.msg("work", "work@g.us", "served"))
	// The backlog is there when the daemon starts: its Sync finds it.
	if _, err := h.w.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.start(t)

	notices, drained, served := 0, 0, false
	for drained < total || !served {
		e := h.next(t)
		switch e.kind {
		case "notice":
			notices++
		case "send":
			if e.text != "served" {
				t.Fatalf("a flood file was carried out: %+v", e)
			}
			served = true
		case "violation":
			m := drainedRE.FindStringSubmatch(e.v.Detail)
			if m == nil || e.v.Group != "family" || e.alert {
				t.Fatalf("want only drain records of family, unalerted; got %+v alert=%v", e.v, e.alert)
			}
			n, _ := strconv.Atoi(m[1])
			drained += n
		}
	}
	if drained != total || notices != 1 {
		t.Errorf("%d files drained of %d, %d notices; want all and one", drained, total, notices)
	}
	if left := countJSON(t, dir); left != 0 {
		t.Errorf("%d flood files left", left)
	}
	if entries, _ := os.ReadDir(h.layout.IPCErrors()); len(entries) != 0 {
		t.Errorf("drained files were quarantined: %d entries", len(entries))
	}
	// Empty again: the group's requests are carried out.
	deadline := time.Now().Add(30 * time.Second)
	for {
		h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "back"))
		e := h.next(t)
		if e.kind == "send" && e.text == "back" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's IPC stays paused: %+v", e)
		}
	}
}

func countJSON(t testing.TB, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}
