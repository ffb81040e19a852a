package daemon

import (
	"context"
	"slices"

	"github.com/nanoclawd/nanoclawd/internal/status"
)

// setPendingRestart records the keys edited in the config file that apply
// only after a restart.
func (d *Daemon) setPendingRestart(keys []string) {
	d.mu.Lock()
	d.pendingRestart = keys
	d.mu.Unlock()
}

// Status reports what the daemon is doing; the control socket and the
// console serve it.
func (d *Daemon) Status(ctx context.Context) (status.Report, error) {
	return status.Build(ctx, d.statusSources())
}

// statusSources are the daemon's parts as status reads them.
func (d *Daemon) statusSources() status.Sources {
	d.mu.Lock()
	defer d.mu.Unlock()
	return status.Sources{Config: d.Config(), Log: d.log, Started: d.started, DB: d.db, Usage: d.usage,
		Channels: d.channels, Groups: d.reg, Queue: d.queue, Router: d.router, Outbox: d.outbox, Tasks: d.sched,
		Backups: d.backups, PendingRestart: slices.Clone(d.pendingRestart), Console: d.consoleState}
}
