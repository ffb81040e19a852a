package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/backup"
	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// setPendingRestart records the keys edited in the config file that apply
// only after a restart.
func (d *Daemon) setPendingRestart(keys []string) {
	d.mu.Lock()
	d.pendingRestart = keys
	d.mu.Unlock()
}

// Status reports what the daemon is doing; the control socket serves it.
func (d *Daemon) Status(ctx context.Context) (status.Report, error) {
	cfg := d.Config()
	now := time.Now()
	r := status.Report{PID: os.Getpid(), Started: d.started, Time: now, ConfigFile: cfg.File,
		Agents: status.Agents{MaxConcurrent: cfg.Agent.MaxConcurrent}}
	for _, ch := range d.channels {
		c := status.Channel{Name: ch.Name(), Connected: ch.Connected()}
		if s, ok := ch.(channel.Reporter); ok {
			c.State = s.Status()
		}
		if b, ok := ch.(channel.Retrier); ok && !c.Connected {
			if t := b.NextRetry(); t.After(now) {
				c.RetryAt = &t
			}
		}
		r.Channels = append(r.Channels, c)
	}

	list, err := d.reg.List(ctx)
	if err != nil {
		return r, err
	}
	last, err := runner.LastRuns(ctx, d.db)
	if err != nil {
		return r, err
	}
	spend, err := d.spend(ctx, cfg, now)
	if err != nil {
		return r, err
	}
	standby := d.router.Standbys()
	queue := map[string]runner.GroupState{}
	for _, s := range d.queue.Snapshot() {
		queue[s.Folder] = s
	}
	onFallback := map[string]status.Fallback{}
	if fs, err := usage.Fallbacks(ctx, d.db); err != nil {
		d.log.Warn().Err(err).Msg("status: groups on a fallback")
	} else {
		for _, f := range fs {
			onFallback[f.Group] = status.Fallback{Upstream: f.Upstream, Since: f.Since}
		}
	}
	d.mu.Lock()
	for _, g := range list {
		q := queue[g.Folder]
		sg := status.Group{Folder: g.Folder, Name: g.Name, JID: g.JID, IsMain: g.IsMain, Agent: "idle",
			QueuedTasks: q.Tasks, Failures: q.Retries}
		if !g.IsMain && g.RequiresTrigger {
			sg.Trigger = g.Trigger
		}
		switch {
		case q.Running:
			sg.Agent, sg.RunningSince, sg.RunningTask = "running", &q.RunningSince, q.RunningTask
			r.Agents.Running++
		case g.Paused:
			sg.Agent = "paused" // by the owner's /pause; /resume starts it again
		case q.Queued:
			sg.Agent = "queued"
			r.Agents.Queued++
		case q.RetryWaiting:
			sg.Agent = "retrying"
		case !standby[g.Folder].IsZero():
			since := standby[g.Folder]
			sg.Agent, sg.StandbySince = "standby", &since
			r.Agents.Standby++
		}
		if l, ok := last[g.Folder]; ok {
			sg.LastRun = &status.Run{Started: l.Started, Finished: l.Finished, OK: l.OK, Error: l.Error, TaskID: l.TaskID}
		}
		sg.Usage = spend.of(g, cfg, now)
		sg.Model, sg.Provider = cfg.Agent.Model, cfg.Agent.Provider
		if o := g.Security; o != nil {
			sg.Model, sg.Provider = cmp.Or(o.Model, sg.Model), cmp.Or(o.Provider, sg.Provider)
		}
		if f, ok := onFallback[g.Folder]; ok {
			sg.Fallback = &f
		}
		r.Groups = append(r.Groups, sg)
	}
	r.PendingRestart = slices.Clone(d.pendingRestart)
	d.mu.Unlock()

	backlog, err := d.outbox.Backlog(ctx)
	if err != nil {
		return r, err
	}
	r.Outbox = []status.Backlog{}
	for _, b := range backlog {
		sb := status.Backlog{ChatJID: b.ChatJID, Count: b.Count, Oldest: b.Oldest, Attempts: b.Attempts, LastError: b.LastError}
		if !b.RetryAt.IsZero() {
			sb.RetryAt = &b.RetryAt
		}
		r.Outbox = append(r.Outbox, sb)
	}

	tasks, err := d.sched.Next(ctx, 5)
	if err != nil {
		return r, err
	}
	r.NextTasks = []status.Task{}
	for _, t := range tasks {
		r.NextTasks = append(r.NextTasks, status.Task{ID: t.ID, Group: t.GroupFolder, NextRun: *t.NextRun,
			Schedule: t.ScheduleType + " " + t.ScheduleValue, Prompt: t.Prompt})
	}

	counts, err := alerts.CountViolations(ctx, d.db, now.Add(-24*time.Hour))
	if err != nil {
		return r, err
	}
	r.Violations24h = []status.Violations{}
	for grp, kinds := range counts {
		for kind, n := range kinds {
			r.Violations24h = append(r.Violations24h, status.Violations{Group: grp, Kind: kind, Count: n})
		}
	}
	slices.SortFunc(r.Violations24h, func(a, b status.Violations) int {
		return strings.Compare(a.Group+"\x00"+a.Kind, b.Group+"\x00"+b.Kind)
	})
	if last, ok, err := backup.ReadLast(cfg.Layout()); err != nil {
		d.log.Warn().Err(err).Msg("status: last backup")
	} else if ok {
		r.LastBackup = &last
	}
	r.NextBackup = d.backups.Next()
	for _, f := range []string{cfg.Layout().DB(), cfg.Layout().DB() + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			r.DatabaseBytes += fi.Size()
		}
	}
	if r.ModelAPI, err = usage.HealthOf(ctx, d.db); err != nil {
		return r, err
	}
	if r.Config, err = json.Marshal(cfg); err != nil {
		return r, err
	}
	d.mu.Lock()
	r.Console = d.consoleState
	d.mu.Unlock()
	if r.PendingRestart == nil {
		r.PendingRestart = []string{}
	}
	r.Unregistered = []status.Unheard{}
	for jid, n := range d.router.Unregistered() {
		r.Unregistered = append(r.Unregistered, status.Unheard{ChatJID: jid, Messages: n})
	}
	slices.SortFunc(r.Unregistered, func(a, b status.Unheard) int { return strings.Compare(a.ChatJID, b.ChatJID) })
	return r, nil
}
