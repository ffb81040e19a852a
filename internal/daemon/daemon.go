// Package daemon wires nanoclawd's parts together and runs them: channels
// feed the router, the router feeds the queue, agents answer through the
// outbox, and the IPC watcher, scheduler and alert reporter run beside
// them. It holds no logic of its own beyond the order of start and stop.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/approvals"
	"github.com/nanoclawd/nanoclawd/internal/backup"
	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
	"github.com/nanoclawd/nanoclawd/internal/channel/whatsapp"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/console"
	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/ipc"
	"github.com/nanoclawd/nanoclawd/internal/media"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/metrics"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/retention"
	"github.com/nanoclawd/nanoclawd/internal/router"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/selftest"
	"github.com/nanoclawd/nanoclawd/internal/spec"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/summary"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// ErrStopForGood wraps a reason the daemon must stop and not be restarted
// into the same state (WhatsApp logged out, or another instance took over
// the WhatsApp session).
var ErrStopForGood = errors.New("stopped for good")

// RetryBaseEnv, when set to a duration, replaces the 5 s first retry delay
// of failed agent runs (tests use it to keep retries short).
const RetryBaseEnv = "NANOCLAWD_RETRY_BASE"

// ShutdownGrace is how long running agents get to finish on SIGTERM.
const ShutdownGrace = 10 * time.Second

// Daemon is one running nanoclawd.
type Daemon struct {
	cfg         atomic.Pointer[config.Config]
	log         zerolog.Logger
	db          *store.DB
	checkpoints *store.Checkpointer
	disk        *diskReserve
	reg         *groups.Registry
	messages    *messages.Store
	channels    channel.Set
	outbox      *outbox.Outbox
	reporter    *alerts.Reporter
	fallback    *alerts.Fallback
	tokens      *ipc.Tokens
	sched       *scheduler.Scheduler
	queue       *runner.Queue
	ledger      *runner.Ledger
	router      *router.Router
	watcher     *ipc.Watcher
	snapshots   *ipc.Snapshots
	backups     *backup.Schedule // nil without backup.every
	daily       *summary.Daily   // nil without alerts.daily
	usage       *usage.Store
	pruner      *retention.Pruner
	proof       *selftest.Verdict // the start-time security test (proof.go)
	console     *console.Server   // the owner's console (console.go)
	metrics     *metrics.Metrics
	owner       *approvals.Commands
	lock        *os.File
	configBad   bool // the config file's last edit was invalid (reload.go; its goroutine only)

	mu             sync.Mutex
	pendingRestart []string
	started        time.Time
	consoleState   *status.Console // nil: console.enabled is false
}

// Config returns the configuration in force.
func (d *Daemon) Config() *config.Config { return d.cfg.Load() }

// New opens the state of cfg and builds every part; Run starts them.
func New(ctx context.Context, cfg *config.Config, log zerolog.Logger) (*Daemon, error) {
	d := &Daemon{log: log}
	d.cfg.Store(cfg)
	store.LimitMallocArenas() // before SQLite allocates from many threads
	lock, err := acquireLock(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	d.lock = lock
	ok := false
	defer func() {
		if !ok {
			d.close()
		}
	}()
	if d.db, d.checkpoints, err = store.OpenWithCheckpointer(cfg.DataDir); err != nil {
		return nil, err
	}
	d.disk = newDiskReserve(d, cfg.Layout().DiskReserve())
	d.db.KeepReserve(d.disk.reserve, d.disk.full)
	// dataDir and groupsDir private before anything is made in them.
	if err := sandbox.Shield(cfg.Layout(), cfg.Agent.RunAs.User()); err != nil {
		return nil, err
	}
	d.reg = groups.New(d.db, cfg.GroupsDir)
	d.reg.Assistant = cfg.AssistantName
	d.messages = messages.New(d.db)
	d.outbox = outbox.New(d.db, &d.channels, d.reg, log.With().Str("part", "outbox").Logger())
	if cfg.Channels.Local.Enabled {
		d.channels = append(d.channels, local.New(cfg.Channels.Local.Socket, d.db, func() int { return d.Config().Media.MaxBytes },
			func(ctx context.Context, jid string) bool { _, err := d.reg.ByJID(ctx, jid); return err == nil }))
	}
	if cfg.Channels.WhatsApp.Enabled {
		d.channels = append(d.channels, whatsapp.New(whatsapp.Options{
			DataDir: cfg.DataDir, AssistantName: cfg.AssistantName, OwnNumber: cfg.Channels.WhatsApp.OwnNumber,
			Logger: log.With().Str("part", "whatsapp").Logger(), Outbox: d.outbox,
		}))
	}
	if cfg.Channels.Telegram.Enabled {
		tgc, err := telegram.New(telegram.Options{
			Token: cfg.Channels.Telegram.BotToken(), APIURL: cfg.Channels.Telegram.APIURL, AssistantName: cfg.AssistantName,
			DB: d.db, Trigger: groupTrigger{d.reg}.Of, Outbox: d.outbox, Audit: skippedUpdates{d},
			MaxBytes: func() int { return d.Config().Media.MaxBytes }, Logger: log.With().Str("part", "telegram").Logger(),
		})
		if err != nil {
			return nil, err
		}
		d.channels = append(d.channels, tgc)
	}
	d.reporter = alerts.NewReporter(d.db, cfg.GroupsDir, d.outbox, d.reg, cfg.Alerts.Cooldown.D(), nil, log.With().Str("part", "alerts").Logger())
	d.reporter.MaxPerGroup = cfg.Alerts.MaxPerGroup
	d.reg.Reporter = d.reporter
	d.fallback = &alerts.Fallback{DB: d.db, Command: cfg.Alerts.Fallback, Cooldown: cfg.Alerts.Cooldown.D(), Link: mainLink{d},
		Main: d.reg, Out: d.outbox, Log: log.With().Str("part", "alerts").Logger()}
	if d.tokens, err = ipc.OpenTokens(ctx, d.db); err != nil {
		return nil, err
	}
	binary, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	d.queue = runner.NewQueue(cfg.Agent.MaxConcurrent, func(folder string) bool {
		g, err := d.reg.ByFolder(context.Background(), folder)
		return err == nil && g.IsMain
	})
	if v, err := time.ParseDuration(os.Getenv(RetryBaseEnv)); err == nil && v > 0 {
		d.queue.RetryBase = v
	}
	d.ledger = runner.NewLedger(d.db)
	d.usage = usage.NewStore(d.db)
	d.snapshots = ipc.NewSnapshots(cfg.Layout(), d.db, d.messages, d.reg, log.With().Str("part", "ipc").Logger())
	d.sched = scheduler.New(d.db, cfg.Location(), d.queue, d.snapshots, log.With().Str("part", "scheduler").Logger())
	d.proof = selftest.NewVerdict()
	d.owner = &approvals.Commands{
		DB: d.db, Groups: d.reg, Config: d.Config, Queue: d.queue, Audit: d.reporter, Outbox: d.outbox,
		Close: func(folder string) error {
			return runner.Close(context.Background(), string(d.Config().Layout().IPC(folder)), d.reporter)
		},
		Spend: spending{d},
		Log:   log.With().Str("part", "approvals").Logger(),
	}
	d.metrics = metrics.New(d.metricsParts())
	d.router = &router.Router{
		Messages: d.messages, Groups: d.reg, Config: d.Config, Queue: d.queue, Outbox: d.outbox, Reporter: d.reporter,
		Tokens: d.tokens, Tasks: d.sched, Ledger: d.ledger, Typing: &d.channels, Binary: binary,
		Log: log.With().Str("part", "router").Logger(), Snapshots: d.snapshots, Usage: d.usage, Proof: d.proof,
		Owner: d.owner, Metrics: d.metrics, Placeholders: &sandbox.Placeholders{Dir: cfg.Layout().Placeholders()},
		Media: &media.Inbound{Config: d.Config, Reporter: d.reporter, Messages: d.messages, Log: log.With().Str("part", "media").Logger()},
	}
	d.newConsole()
	if d.watcher, err = ipc.NewWatcher(ipc.Config{
		Layout: cfg.Layout(), DB: d.db, Tokens: d.tokens, Groups: d.reg,
		Tasks: d.sched, Outbox: d.outbox, Messages: d.messages, Alerts: d.reporter, Snapshots: d.snapshots,
		DefaultTrigger: func() string { return d.Config().DefaultTrigger() },
		View:           d.runView,
		Reporter:       d.reporter, Log: log.With().Str("part", "ipc").Logger(), Location: cfg.Location(),
	}); err != nil {
		return nil, err
	}
	d.pruner = &retention.Pruner{DB: d.db, Log: log.With().Str("part", "retention").Logger(), Ages: func() retention.Ages {
		r := d.Config().Retention
		return retention.Ages{Messages: r.Messages.D(), Usage: r.Usage.D(), Audit: r.Audit.D(), Runs: r.Runs.D()}
	}}
	if cfg.Backup.Every > 0 {
		src := backup.NewSource(cfg.Layout(), cfg.File, spec.MainClaudeDir(cfg, os.LookupEnv))
		src.Main = d.reg.MainFolder
		d.backups = &backup.Schedule{Source: src, Dir: cfg.Backup.Dir,
			Every: cfg.Backup.Every.D(), Keep: cfg.Backup.Keep, Tell: d.outbox, Log: log.With().Str("part", "backup").Logger()}
	}
	if h, m, ok := cfg.Alerts.DailyAt(); ok {
		d.daily = &summary.Daily{Hour: h, Minute: m, Loc: cfg.Location(), DB: d.db, Layout: cfg.Layout(), Tell: d.outbox, Spend: d.usage,
			Log: log.With().Str("part", "summary").Logger()}
		for _, ch := range d.channels {
			if c, ok := ch.(summary.Connection); ok {
				d.daily.WhatsApp = c
			}
		}
	}
	ok = true
	return d, nil
}

// Run serves until ctx ends, then shuts down in order: stop taking work,
// let agents finish (ShutdownGrace), flush the outbox, close SQLite.
// ErrLoggedOut from WhatsApp ends it early.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.close()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cfg := d.Config()
	d.started = time.Now()
	if err := d.ledger.KillLeftovers(ctx, d.log.With().Str("part", "runner").Logger()); err != nil {
		d.log.Warn().Err(err).Msg("look for processes left by a previous run")
	}
	d.queue.Start(d.router) // after the leftovers are gone: no agent of ours is among them
	// The config and the registry are watched before they are read and
	// before "running" is logged: a watch set up later, in its goroutine,
	// missed an edit made in between for good (the next edit brought it).
	configChanges, configErr := config.Watch(ctx, cfg.File)
	groupChanges, groupsErr := groups.WatchChanges(ctx, cfg.DataDir)
	nGroups, err := d.syncGroups(ctx)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	goRun := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				d.log.Error().Err(err).Str("part", name).Msg("stopped")
			}
		}()
	}
	bg, bgCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer bgCancel()
	// Copies of files an agent sent that a crash left behind; an hour's
	// grace spares one the IPC watcher is about to queue.
	if err := d.outbox.SweepFiles(ctx, cfg.Layout().Outgoing(), time.Hour); err != nil {
		d.log.Warn().Err(err).Msg("sweep old copies of sent files")
	}
	// Gateway sockets a daemon killed with -9 left behind.
	if n := gateway.SweepSockets(cfg.Layout().Gateways()); n > 0 {
		d.log.Info().Int("sockets", n).Msg("removed the gateway sockets a previous daemon left")
	}
	// The outbox outlives ctx so shutdown can flush it.
	var outWG sync.WaitGroup
	outWG.Add(1)
	go func() { defer outWG.Done(); d.outbox.Run(bg) }()
	goRun("checkpoints", d.checkpoints.Run)
	goRun("disk", d.disk.Run)
	goRun("retention", d.pruner.Run)
	goRun("search index", func(ctx context.Context) error {
		return d.messages.RunIndex(ctx, d.log.With().Str("part", "messages").Logger())
	})
	goRun("alerts", d.reporter.Run)
	if len(cfg.Alerts.Fallback) > 0 {
		goRun("fallback", d.fallback.Run)
	}
	goRun("scheduler", d.sched.Run)
	goRun("ipc", d.watcher.Run)
	goRun("groups", func(ctx context.Context) error {
		if groupsErr != nil {
			return groupsErr
		}
		return d.watchRegistry(ctx, groupChanges)
	})
	goRun("config", func(ctx context.Context) error {
		if configErr != nil {
			return configErr
		}
		return d.watchConfig(ctx, configChanges)
	})
	if d.backups != nil {
		goRun("backup", d.backups.Run)
	}
	if d.daily != nil {
		goRun("summary", d.daily.Run)
	}
	goRun("security test", d.proveSandbox)
	// The control socket is there whatever channels run, before "running"
	// is logged, so `nanoclawd status` works as soon as the daemon is up.
	if ln, err := status.Listen(status.SocketPath(cfg.DataDir)); err != nil {
		d.log.Error().Err(err).Msg("'nanoclawd status' will not reach this daemon")
	} else {
		goRun("control", func(ctx context.Context) error {
			return status.Serve(ctx, ln, d.Status, status.Route{Pattern: "POST " + status.ConsoleLoginPath, Handler: d.consoleLogin})
		})
	}
	d.startConsole(goRun)
	for _, ch := range d.channels {
		// A channel with a socket of its own (the local one) binds it
		// now, so that a client started once "running" is logged finds it.
		if o, ok := ch.(channel.Opener); ok {
			if err := o.Open(); err != nil {
				d.log.Error().Err(err).Str("part", ch.Name()).Msg("stopped")
				continue
			}
		}
		goRun(ch.Name(), func(ctx context.Context) error {
			err := ch.Run(ctx, d.router)
			switch {
			case errors.Is(err, whatsapp.ErrLoggedOut), errors.Is(err, whatsapp.ErrStreamReplaced):
				d.log.Error().Err(err).Msg("stopping the daemon")
				if errors.Is(err, whatsapp.ErrLoggedOut) {
					// Before stopping: the owner hears of it through
					// alerts.fallback now, and in the main chat once paired again.
					if ferr := d.fallback.Outage(ctx, loggedOutText(time.Now())); ferr != nil {
						d.log.Error().Err(ferr).Msg("tell the owner about the logout")
					}
				}
				cancel(fmt.Errorf("%w: %w", ErrStopForGood, err))
				return nil
			case errors.Is(err, whatsapp.ErrNotPaired):
				return nil // the channel said so, with what to do; the others keep running
			}
			return err
		})
	}
	pending, err := d.router.Pending(ctx)
	if err != nil {
		d.log.Error().Err(err).Msg("look for unanswered messages")
	}
	for _, folder := range pending {
		d.queue.EnqueueMessages(folder)
	}
	d.router.WarmUp(ctx)
	d.log.Info().Int("groups", nGroups).Strs("resumed", pending).Str("config", cfg.File).Msg("nanoclawd running")

	<-ctx.Done()
	d.log.Info().Msg("shutting down: letting running agents finish")
	grace, cancelGrace := context.WithTimeout(context.Background(), ShutdownGrace)
	if err := d.queue.Shutdown(grace); err != nil {
		d.log.Warn().Err(err).Msg("agents did not finish in time and were stopped")
	}
	cancelGrace()
	wg.Wait()
	// What still writes to SQLite on its own time ends before the store
	// closes: agents started ahead (they settle their IPC token and process
	// group after their process), the budget checks after the runs' last
	// answers, voice notes being transcribed.
	d.router.WaitWarm()
	d.router.WaitMeters()
	d.router.Media.Close()
	d.router.CloseSockets() // no run starts any more: the socket made for the next one goes
	flush, cancelFlush := context.WithTimeout(context.Background(), 5*time.Second)
	if err := d.outbox.Flush(flush); err != nil {
		d.log.Warn().Err(err).Msg("some messages wait in the outbox for the next start")
	}
	cancelFlush()
	bgCancel()
	outWG.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

func (d *Daemon) close() {
	if d.db != nil {
		d.db.Close()
	}
	if d.lock != nil {
		d.lock.Close()
	}
}

// watchRegistry applies registry changes made by the CLI at once (changes
// is groups.WatchChanges): new groups are watched, removed ones are not,
// and alerts waiting for a main group go out.
func (d *Daemon) watchRegistry(ctx context.Context, changes <-chan struct{}) error {
	for range changes {
		if _, err := d.syncGroups(ctx); err != nil {
			d.log.Error().Err(err).Msg("reload groups")
		}
	}
	return nil
}

func (d *Daemon) syncGroups(ctx context.Context) (int, error) {
	n, err := d.watcher.Sync(ctx)
	if err != nil {
		return 0, err
	}
	if err := d.reporter.Kick(ctx); err != nil {
		d.log.Warn().Err(err).Msg("alerts waiting for a main group")
	}
	d.sched.Changed()         // `groups import` may have added tasks
	d.router.RefreshWarm(ctx) // a changed policy: agents started ahead are started again
	d.log.Info().Int("groups", n).Msg("groups reloaded")
	return n, nil
}
