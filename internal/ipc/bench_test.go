package ipc

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// BenchmarkIPCLatency measures one file at a time: from the rename that
// publishes it to the SendMessage call, reported as p50/p99.
func BenchmarkIPCLatency(b *testing.B) {
	h := newHarness(b)
	h.start(b)
	dir := filepath.Join(h.root, "family", layout.MessagesDir)
	body := fmt.Sprintf(`{"type":"message","chatJid":"family@g.us","text":"x","token":%q}`, h.token["family"])
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		tmp := filepath.Join(dir, fmt.Sprintf("%09d.json.tmp", i))
		os.WriteFile(tmp, []byte(body), 0o600)
		start := time.Now()
		os.Rename(tmp, tmp[:len(tmp)-4])
		if e := h.next(b); e.kind != "send" {
			b.Fatalf("got %+v", e)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkIPCThroughput publishes b.N files at once and measures how fast
// they are all carried out (files/s), checking none is lost.
func BenchmarkIPCThroughput(b *testing.B) {
	h := newHarness(b)
	h.start(b)
	dir := filepath.Join(h.root, "family", layout.MessagesDir)
	body := fmt.Sprintf(`{"type":"message","chatJid":"family@g.us","text":"x","token":%q}`, h.token["family"])
	for i := range b.N {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%09d.json.tmp", i)), []byte(body), 0o600)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		tmp := filepath.Join(dir, fmt.Sprintf("%09d.json.tmp", i))
		os.Rename(tmp, tmp[:len(tmp)-4])
	}
	keys := map[string]bool{}
	for len(keys) < b.N {
		e := h.next(b)
		if e.kind != "send" || keys[e.key] {
			b.Fatalf("got %+v (twice: %v)", e, keys[e.key])
		}
		keys[e.key] = true
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "files/s")
}
