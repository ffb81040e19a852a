package daemon

import (
	"context"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/ipc"
	"github.com/nanoclawd/nanoclawd/internal/metrics"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// metricsSource reads the daemon's state for a scrape.
type metricsSource struct{ d *Daemon }

func (m metricsSource) Snapshot(ctx context.Context) (metrics.Snapshot, error) {
	d := m.d
	s := metrics.Snapshot{MessagesIn: map[string]float64{}, MessagesOut: map[string]float64{}, IPC: map[string]float64{},
		Violations: map[string]float64{}, Connected: map[string]bool{}, ModelAPI: map[string]bool{}}
	for _, ch := range d.channels {
		s.MessagesIn[ch.Name()], s.MessagesOut[ch.Name()] = 0, 0
		s.Connected[ch.Name()] = ch.Connected()
	}
	in, err := d.messages.ReceivedByChat(ctx)
	if err != nil {
		return s, err
	}
	for jid, n := range in {
		s.MessagesIn[d.channelOf(jid)] += float64(n)
	}
	out, err := d.outbox.SentByChat(ctx)
	if err != nil {
		return s, err
	}
	for jid, n := range out {
		s.MessagesOut[d.channelOf(jid)] += float64(n)
	}
	handled, refused, err := ipc.Decided(ctx, d.db)
	if err != nil {
		return s, err
	}
	s.IPC["handled"], s.IPC["refused"] = float64(handled), float64(refused)
	for _, k := range []security.Kind{security.KindFilesystem, security.KindNetwork, security.KindPermission, security.KindTool, security.KindIPC, security.KindLimit} {
		s.Violations[string(k)] = 0
	}
	counts, err := alerts.CountViolations(ctx, d.db, time.Unix(0, 0))
	if err != nil {
		return s, err
	}
	for _, kinds := range counts {
		for k, n := range kinds {
			s.Violations[k] += float64(n)
		}
	}
	backlog, err := d.outbox.Backlog(ctx)
	if err != nil {
		return s, err
	}
	for _, b := range backlog {
		s.Backlog += float64(b.Count)
	}
	s.Standbys = float64(len(d.router.Standbys()))
	list, err := d.reg.List(ctx)
	if err != nil {
		return s, err
	}
	used, err := d.usage.TotalsByModel(ctx, time.Unix(0, 0), time.Now().Add(time.Minute), "")
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
			s.Usage = append(s.Usage, metrics.GroupModel{Group: u.Group, Model: u.Model})
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
			s.Usage = append(s.Usage, metrics.GroupModel{Group: g.Folder})
		}
	}
	s.ModelAPI["credential"], s.ModelAPI["rate"] = false, false
	health, err := usage.HealthOf(ctx, d.db)
	if err != nil {
		return s, err
	}
	for _, h := range health {
		s.ModelAPI[h.Kind] = true
	}
	return s, nil
}

// channelOf names the channel that owns jid ("" for none enabled).
func (d *Daemon) channelOf(jid string) string {
	for _, ch := range d.channels {
		if ch.Owns(jid) {
			return ch.Name()
		}
	}
	return "other"
}
