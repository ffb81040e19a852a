package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/config"
)

// watchConfig reloads the config file when it changes (changes is its
// config.Watch, made before the daemon says it runs). A valid edit
// applies to the next agent run; an invalid one keeps the last good config
// and is reported in the log and to the main group.
func (d *Daemon) watchConfig(ctx context.Context, changes <-chan struct{}) error {
	// An edit made after the config was read, before the watch began, is
	// applied if it reads whole; a file caught in the middle of a write is
	// the watch's to judge once the write has settled.
	if cfg, changed, restart, err := config.Reload(d.Config()); err == nil {
		d.apply(ctx, cfg, changed, restart)
	}
	for range changes {
		d.reload(ctx)
	}
	return nil
}

func (d *Daemon) reload(ctx context.Context) {
	old := d.Config()
	cfg, changed, restart, err := config.Reload(old)
	if err != nil {
		var errs config.Errors
		lines := []string{err.Error()}
		if errors.As(err, &errs) {
			lines = strings.Split(errs.Error(), "\n")
		}
		for _, l := range lines {
			d.log.Error().Str("problem", l).Msg("config edit is invalid; keeping the last good config")
		}
		d.outbox.TellMain(ctx, fmt.Sprintf("nanoclawd: the edit to %s is invalid, so the last good config stays in force:\n%s\nFix it (nanoclawd config check).", filepath.Base(old.File), strings.Join(lines, "\n")))
		d.configBad = true
		return
	}
	if d.configBad {
		// The owner was told of the error: the fix is news too.
		d.configBad = false
		d.log.Info().Msg("config OK again")
		d.outbox.TellMain(ctx, fmt.Sprintf("nanoclawd: config OK again: %s is valid and in force.", filepath.Base(old.File)))
	}
	// A channel stopped by what the owner fixes elsewhere (Telegram's 409:
	// another program polled the bot) tries again at any valid save.
	for _, ch := range d.channels {
		if r, ok := ch.(interface{ Resume() }); ok {
			r.Resume()
		}
	}
	d.apply(ctx, cfg, changed, restart)
}

// apply puts cfg, read from the file, in force: changed are the keys that
// apply now, restart those that wait for a restart.
func (d *Daemon) apply(ctx context.Context, cfg *config.Config, changed, restart []string) {
	d.setPendingRestart(restart)
	if len(changed) == 0 && len(restart) == 0 {
		return
	}
	d.cfg.Store(cfg)
	d.router.RefreshWarm(ctx) // agents started ahead with the old config make way
	ev := d.log.Info().Strs("changed", changed)
	if len(restart) > 0 {
		ev = ev.Strs("needRestart", restart)
	}
	ev.Msg("config reloaded; changes apply to the next agent run")
}
