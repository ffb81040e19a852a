package metrics

import (
	"context"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// Parts are the daemon's parts a scrape reads, declared as it uses them.
// It is a Source: each scrape reads them afresh.
type Parts struct {
	Channels *channel.Set
	Messages interface {
		ReceivedByChat(ctx context.Context) (map[string]int64, error)
	}
	Outbox interface {
		SentByChat(ctx context.Context) (map[string]int64, error)
		Backlog(ctx context.Context) ([]outbox.Backlog, error)
	}
	Groups interface {
		List(ctx context.Context) ([]groups.Group, error)
	}
	Usage interface {
		TotalsByModel(ctx context.Context, since, until time.Time, group string) ([]usage.ModelTotal, error)
	}
	Standbys   func() int                                                    // agents started ahead, waiting
	Decided    func(ctx context.Context) (handled, refused int64, err error) // IPC files decided
	Violations func(ctx context.Context) (map[string]map[string]int, error)  // audit records by group and kind
	Health     func(ctx context.Context) ([]usage.Health, error)             // the model API's standing problems
}

// Snapshot implements Source.
func (src Parts) Snapshot(ctx context.Context) (Snapshot, error) {
	s := Snapshot{MessagesIn: map[string]float64{}, MessagesOut: map[string]float64{}, IPC: map[string]float64{},
		Violations: map[string]float64{}, Connected: map[string]bool{}, ModelAPI: map[string]bool{}}
	for _, ch := range *src.Channels {
		s.MessagesIn[ch.Name()], s.MessagesOut[ch.Name()] = 0, 0
		s.Connected[ch.Name()] = ch.Connected()
	}
	in, err := src.Messages.ReceivedByChat(ctx)
	if err != nil {
		return s, err
	}
	for jid, n := range in {
		s.MessagesIn[src.Channels.NameOf(jid)] += float64(n)
	}
	out, err := src.Outbox.SentByChat(ctx)
	if err != nil {
		return s, err
	}
	for jid, n := range out {
		s.MessagesOut[src.Channels.NameOf(jid)] += float64(n)
	}
	handled, refused, err := src.Decided(ctx)
	if err != nil {
		return s, err
	}
	s.IPC["handled"], s.IPC["refused"] = float64(handled), float64(refused)
	for _, k := range []security.Kind{security.KindFilesystem, security.KindNetwork, security.KindPermission, security.KindTool, security.KindIPC, security.KindLimit} {
		s.Violations[string(k)] = 0
	}
	counts, err := src.Violations(ctx)
	if err != nil {
		return s, err
	}
	for _, kinds := range counts {
		for k, n := range kinds {
			s.Violations[k] += float64(n)
		}
	}
	backlog, err := src.Outbox.Backlog(ctx)
	if err != nil {
		return s, err
	}
	for _, b := range backlog {
		s.Backlog += float64(b.Count)
	}
	s.Standbys = float64(src.Standbys())
	list, err := src.Groups.List(ctx)
	if err != nil {
		return s, err
	}
	used, err := src.Usage.TotalsByModel(ctx, time.Unix(0, 0), time.Now().Add(time.Minute), "")
	if err != nil {
		return s, err
	}
	// One series per group and model: a model served by two providers
	// (a fallback) is summed, as Prometheus takes each label set once.
	idx := map[[2]string]int{}
	for _, u := range used {
		k := [2]string{u.Group, u.Model}
		i, ok := idx[k]
		if !ok {
			i = len(s.Usage)
			idx[k] = i
			s.Usage = append(s.Usage, GroupModel{Group: u.Group, Model: u.Model})
		}
		g := &s.Usage[i]
		g.Input += float64(u.Input)
		g.Output += float64(u.Output)
		g.CacheWrite += float64(u.CacheWrite)
		g.CacheRead += float64(u.CacheRead)
		g.Cost += u.CostUSD
	}
	seen := map[string]bool{}
	for k := range idx {
		seen[k[0]] = true
	}
	for _, g := range list {
		if !seen[g.Folder] { // a baseline of 0 until its first request
			s.Usage = append(s.Usage, GroupModel{Group: g.Folder})
		}
	}
	s.ModelAPI["credential"], s.ModelAPI["rate"] = false, false
	health, err := src.Health(ctx)
	if err != nil {
		return s, err
	}
	for _, h := range health {
		s.ModelAPI[h.Kind] = true
	}
	return s, nil
}
