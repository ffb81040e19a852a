package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/config"
)

// watchConfig reloads the config file when it changes. A valid edit
// applies to the next agent run; an invalid one keeps the last good config
// and is reported in the log and to the main group.
func (d *Daemon) watchConfig(ctx context.Context) error {
	changes, err := config.Watch(ctx, d.Config().File)
	if err != nil {
		return err
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
