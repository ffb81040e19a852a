package ipc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/testkit/outboxtest"
)

// BenchmarkIPCFloodRefusals publishes b.N files with a bad token at once,
// with the daemon's own effects (journal, audit rows and lines, the alert
// cap, the quarantine), and measures how fast they are all handled
// (files/s).
func BenchmarkIPCFloodRefusals(b *testing.B) {
	h := newHarness(b)
	out := outbox.New(h.db, outboxtest.NewRecorder(), h.groups, zerolog.Nop())
	rep := alerts.NewReporter(h.db, h.layout.GroupsDir, out, h.groups, time.Minute, nil, zerolog.Nop())
	h.w.cfg.Alerts, h.w.cfg.Outbox = rep, out
	h.w.fx = daemonEffects{&h.w.cfg}
	dir := filepath.Join(h.root, "family", layout.MessagesDir)
	body := []byte(`{"type":"message","chatJid":"family@g.us","text":"x","token":"forged"}`)
	for i := range b.N {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%09d.json", i)), body, 0o600)
	}
	b.ResetTimer()
	start := time.Now()
	h.w.scanFolder(context.Background(), "family", true)
	if n := countJSON(b, dir); n != 0 {
		b.Fatalf("%d files left", n)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "files/s")
}
