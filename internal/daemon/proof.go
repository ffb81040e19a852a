package daemon

import (
	"context"
	"fmt"
	"os"

	"github.com/nanoclawd/nanoclawd/internal/selftest"
)

// proveSandbox runs `nanoclawd security test` once, in the background of
// the start: readiness does not wait for it, confined runs do (the
// router's Proof). If a boundary does not hold, confined runs are refused
// (fail closed) and the main chat is told once.
func (d *Daemon) proveSandbox(ctx context.Context) error {
	cfg := d.Config()
	rep, err := selftest.Run(ctx, selftest.Options{Config: cfg, Binary: d.router.Binary, Weaken: os.Getenv(selftest.WeakenEnv)})
	if ctx.Err() != nil {
		d.proof.Set(ctx.Err())
		return nil
	}
	if err != nil {
		err = fmt.Errorf("the sandbox could not be proven on this machine, so confined groups get no agent: %w", err)
	} else {
		err = selftest.Refusal(rep)
	}
	d.proof.Set(err)
	if err != nil {
		d.log.Error().Err(err).Msg("security test")
		d.outbox.TellMain(ctx, fmt.Sprintf("[SANDBOX ALERT] %s: %v. Run 'nanoclawd security test' and 'nanoclawd doctor'.", cfg.AssistantName, err))
		return nil
	}
	d.log.Info().Msg("security test: every boundary of the sandbox holds")
	return nil
}
