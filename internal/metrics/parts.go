package metrics

import (
	"context"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// Parts are the daemon's parts a scrape reads, declared as it uses them.
// It is a Source: each scrape reads them afresh, a few small tables and
// indexed rows, never a count over a table that grows.
type Parts struct {
	Channels *channel.Set
	// DB holds the running totals (migrations/0020_counters.sql).
	DB     *store.DB
	Outbox interface {
		Backlog(ctx context.Context) ([]outbox.Backlog, error)
	}
	Groups interface {
		List(ctx context.Context) ([]groups.Group, error)
	}
	Usage interface {
		AllTime(ctx context.Context) ([]usage.ModelTotal, error)
	}
	Standbys func() int                                        // agents started ahead, waiting
	Health   func(ctx context.Context) ([]usage.Health, error) // the model API's standing problems
}

// Snapshot implements Source. Every label value the daemon knows of is
// there from the start at 0: each channel, run outcome, IPC verdict,
// violation kind, registered group and model API problem.
func (src Parts) Snapshot(ctx context.Context) (Snapshot, error) {
	s := Snapshot{MessagesIn: map[string]float64{}, MessagesOut: map[string]float64{}, Runs: map[string]float64{"ok": 0, "error": 0},
		IPC:        map[string]float64{"handled": 0, "refused": 0},
		Violations: map[string]float64{}, Connected: map[string]bool{}, ModelAPI: map[string]bool{}}
	for _, ch := range *src.Channels {
		s.MessagesIn[ch.Name()], s.MessagesOut[ch.Name()] = 0, 0
		s.Connected[ch.Name()] = ch.Connected()
	}
	for _, k := range []security.Kind{security.KindFilesystem, security.KindNetwork, security.KindPermission, security.KindTool, security.KindIPC, security.KindLimit} {
		s.Violations[string(k)] = 0
	}
	for _, k := range usage.HealthKinds {
		s.ModelAPI[k] = false
	}
	s.Standbys = float64(src.Standbys())
	totals, err := readCounters(ctx, src.DB)
	if err != nil {
		return s, err
	}
	for jid, n := range totals["received"] {
		s.MessagesIn[src.Channels.NameOf(jid)] += n
	}
	for jid, n := range totals["sent"] {
		s.MessagesOut[src.Channels.NameOf(jid)] += n
	}
	for k, n := range totals["runs"] {
		s.Runs[k] += n
	}
	for k, n := range totals["ipc"] {
		s.IPC[k] += n
	}
	for k, n := range totals["violations"] {
		s.Violations[k] += n
	}
	backlog, err := src.Outbox.Backlog(ctx)
	if err != nil {
		return s, err
	}
	for _, b := range backlog {
		s.Backlog += float64(b.Count)
	}
	list, err := src.Groups.List(ctx)
	if err != nil {
		return s, err
	}
	// Each registered group has a series without provider and model from
	// the start, at 0 for ever: its requests go to series of their own
	// provider and model, which no one can know before the first answer.
	for _, g := range list {
		s.Usage = append(s.Usage, Usage{Group: g.Folder})
	}
	used, err := src.Usage.AllTime(ctx)
	if err != nil {
		return s, err
	}
	for _, u := range used {
		s.Usage = append(s.Usage, Usage{Group: u.Group, Provider: u.Provider, Model: u.Model, Input: float64(u.Input),
			Output: float64(u.Output), CacheWrite: float64(u.CacheWrite), CacheRead: float64(u.CacheRead), Cost: u.CostUSD})
	}
	health, err := src.Health(ctx)
	if err != nil {
		return s, err
	}
	for _, h := range health {
		s.ModelAPI[h.Kind] = true
	}
	return s, nil
}

// readCounters reads the running totals the database keeps as rows are
// written, which pruning never lowers: name → key → total.
func readCounters(ctx context.Context, db *store.DB) (map[string]map[string]float64, error) {
	rows, err := db.QueryContext(ctx, `SELECT name, key, n FROM counters`)
	if err != nil {
		return nil, fmt.Errorf("metrics: read the running totals: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]float64{}
	for rows.Next() {
		var name, key string
		var n int64
		if err := rows.Scan(&name, &key, &n); err != nil {
			return nil, fmt.Errorf("metrics: read the running totals: %w", err)
		}
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][key] = float64(n)
	}
	return out, rows.Err()
}
