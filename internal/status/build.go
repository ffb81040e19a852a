package status

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/backup"
	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// Sources are the parts of a running daemon a Report is built from.
type Sources struct {
	Config  *config.Config
	Log     zerolog.Logger
	Started time.Time
	DB      *store.DB // last runs, fallbacks, violations, the model API's health
	Usage   interface {
		Spending(ctx context.Context, gs []groups.Group, global security.Budget, now time.Time, loc *time.Location) (map[string]usage.GroupSpend, error)
	}
	Channels []channel.Channel
	Groups   interface {
		List(context.Context) ([]groups.Group, error)
	}
	Queue interface{ Snapshot() []runner.GroupState }
	// Router tells the standbys (by folder, since when) and the chats no
	// group has (by JID, messages heard).
	Router interface {
		Standbys() map[string]time.Time
		Unregistered() map[string]int
	}
	Outbox interface {
		Backlog(context.Context) ([]outbox.Backlog, error)
	}
	Tasks interface {
		Next(context.Context, int) ([]scheduler.Task, error)
	}
	Backups        interface{ Next() *time.Time }
	PendingRestart []string
	Console        *Console // nil: console.enabled is false
}

// Build reports what the daemon of s is doing.
func Build(ctx context.Context, s Sources) (Report, error) {
	cfg := s.Config
	now := time.Now()
	r := Report{PID: os.Getpid(), Started: s.Started, Time: now, ConfigFile: cfg.File,
		Agents: Agents{MaxConcurrent: cfg.Agent.MaxConcurrent}}
	for _, ch := range s.Channels {
		c := Channel{Name: ch.Name(), Connected: ch.Connected()}
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

	list, err := s.Groups.List(ctx)
	if err != nil {
		return r, err
	}
	last, err := runner.LastRuns(ctx, s.DB)
	if err != nil {
		return r, err
	}
	spend, err := s.Usage.Spending(ctx, list, cfg.Agent.Budget, now, cfg.Location())
	if err != nil {
		return r, err
	}
	standby := s.Router.Standbys()
	queue := map[string]runner.GroupState{}
	for _, s := range s.Queue.Snapshot() {
		queue[s.Folder] = s
	}
	onFallback := map[string]Fallback{}
	if fs, err := usage.Fallbacks(ctx, s.DB); err != nil {
		s.Log.Warn().Err(err).Msg("status: groups on a fallback")
	} else {
		for _, f := range fs {
			onFallback[f.Group] = Fallback{Upstream: f.Upstream, Since: f.Since}
		}
	}
	for _, g := range list {
		q := queue[g.Folder]
		sg := Group{Folder: g.Folder, Name: g.Name, JID: g.JID, IsMain: g.IsMain, Agent: "idle",
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
			sg.LastRun = &LastRun{Started: l.Started, Finished: l.Finished, OK: l.OK, Stopped: l.Stopped, Error: l.Error, TaskID: l.TaskID}
		}
		sg.Usage = usageOf(spend[g.Folder])
		sg.Model, sg.Provider = cfg.Agent.Model, cfg.Agent.Provider
		if o := g.Security; o != nil {
			sg.Model, sg.Provider = cmp.Or(o.Model, sg.Model), cmp.Or(o.Provider, sg.Provider)
		}
		if f, ok := onFallback[g.Folder]; ok {
			sg.Fallback = &f
		}
		r.Groups = append(r.Groups, sg)
	}
	r.PendingRestart = s.PendingRestart

	backlog, err := s.Outbox.Backlog(ctx)
	if err != nil {
		return r, err
	}
	r.Outbox = []Backlog{}
	for _, b := range backlog {
		sb := Backlog{ChatJID: b.ChatJID, Count: b.Count, Oldest: b.Oldest, Attempts: b.Attempts, LastError: b.LastError}
		if !b.RetryAt.IsZero() {
			sb.RetryAt = &b.RetryAt
		}
		r.Outbox = append(r.Outbox, sb)
	}

	tasks, err := s.Tasks.Next(ctx, 5)
	if err != nil {
		return r, err
	}
	r.NextTasks = []Task{}
	for _, t := range tasks {
		r.NextTasks = append(r.NextTasks, Task{ID: t.ID, Group: t.GroupFolder, NextRun: *t.NextRun,
			Schedule: t.ScheduleType + " " + t.ScheduleValue, Prompt: t.Prompt})
	}

	counts, err := alerts.CountViolations(ctx, s.DB, now.Add(-24*time.Hour))
	if err != nil {
		return r, err
	}
	r.Violations24h = []Violations{}
	for grp, kinds := range counts {
		for kind, n := range kinds {
			r.Violations24h = append(r.Violations24h, Violations{Group: grp, Kind: kind, Count: n})
		}
	}
	slices.SortFunc(r.Violations24h, func(a, b Violations) int {
		return strings.Compare(a.Group+"\x00"+a.Kind, b.Group+"\x00"+b.Kind)
	})
	if last, ok, err := backup.ReadLast(cfg.Layout()); err != nil {
		s.Log.Warn().Err(err).Msg("status: last backup")
	} else if ok {
		r.LastBackup = &last
	}
	r.NextBackup = s.Backups.Next()
	for _, f := range []string{cfg.Layout().DB(), cfg.Layout().DB() + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			r.DatabaseBytes += fi.Size()
		}
	}
	if r.ModelAPI, err = usage.HealthOf(ctx, s.DB); err != nil {
		return r, err
	}
	if name, v := security.CredentialInUse(cfg.Agent.Env, os.Getenv); name != "" {
		r.Credential = Credential{Name: name, FromEnvFile: slices.Contains(config.FromEnvFile(), name), Fingerprint: security.Fingerprint(v)}
	}
	if r.Config, err = json.Marshal(cfg.Masked()); err != nil {
		return r, err
	}
	r.Console = s.Console
	if r.PendingRestart == nil {
		r.PendingRestart = []string{}
	}
	r.Unregistered = []Unheard{}
	for jid, n := range s.Router.Unregistered() {
		r.Unregistered = append(r.Unregistered, Unheard{ChatJID: jid, Messages: n})
	}
	slices.SortFunc(r.Unregistered, func(a, b Unheard) int { return strings.Compare(a.ChatJID, b.ChatJID) })
	return r, nil
}
