package router

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/confine"
	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// errShuttingDown is a run that did not start, or an agent that was
// stopped, because the daemon is stopping (or, for an agent started ahead,
// because it was replaced): not a failure of the run, the agent or the
// sandbox.
var errShuttingDown = errors.New("nanoclawd is shutting down")

// confine puts a non-main run in its OS sandbox (package confine), its
// model requests metered by meter, and readies the watch on its limits.
// If the sandbox cannot be built, or the start-time proof found a boundary
// broken, the run fails closed and the main group is told.
func (r *Router) confine(ctx context.Context, cfg *config.Config, g groups.Group, eff security.Effective, spec *runner.Spec, sessionDir string, meter gateway.Meter, unanswered chan<- string) (*confine.Confinement, error) {
	user := cfg.Agent.RunAs.User()
	if err := sandbox.Probe(ctx, user); err != nil {
		if ctx.Err() != nil {
			// The probe was killed with the run: no verdict on the sandbox.
			return nil, fmt.Errorf("not started: %w (%w)", errShuttingDown, err)
		}
		return nil, r.failClosed(ctx, cfg, g, err)
	}
	if r.Proof != nil {
		// The daemon told the main chat once when the proof failed.
		if err := r.Proof.Wait(ctx); err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				// Shutting down cut the security test short: no verdict on the sandbox.
				return nil, fmt.Errorf("not started: %w (%w)", errShuttingDown, err)
			}
			r.Log.Error().Err(err).Str("group", g.Folder).Msg("not starting the agent in a sandbox that does not hold")
			return nil, runner.NoRetry(errSandboxBroken)
		}
	}
	c, err := confine.New(confine.Options{
		Config: cfg, Policy: eff, Spec: spec, SessionDir: sessionDir, Binary: r.Binary,
		Upstream: os.Getenv("ANTHROPIC_BASE_URL"), Reporter: r.Reporter, Meter: meter, Log: r.Log, Route: r.route(cfg, eff), Routes: r.routes(g.Folder),
		Unanswered: unanswered, Sockets: &r.sockets, Placeholders: r.Placeholders,
	})
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("not started: %w (%w)", errShuttingDown, err)
	}
	if errors.Is(err, sandbox.ErrUnavailable) {
		return nil, r.failClosed(ctx, cfg, g, err)
	}
	if err != nil {
		return nil, err
	}
	c.Watch()
	return c, nil
}

// CloseSockets removes the gateway socket made ahead for the next
// confined run; call it once no run starts any more.
func (r *Router) CloseSockets() { r.sockets.Close() }

// newMeter is the meter of one run of g (usage.Meter), which the run's
// relay tells of each model request.
func (r *Router) newMeter(g groups.Group) *usage.Meter {
	return usage.NewMeter(usage.MeterEnv{Store: r.Usage, Groups: r.Groups, Settings: r.meterSettings, Main: r.Outbox, Log: r.Log, Checks: &r.budgetChecks}, g)
}

// WaitMeters returns once the budget checks that followed the runs'
// answers are done (they tell the main chat through SQLite). Call it
// when no run is left.
func (r *Router) WaitMeters() { r.budgetChecks.Wait() }

// meterSettings are the values of the current config a meter reads.
func (r *Router) meterSettings() usage.Settings {
	cfg := r.Config()
	return usage.Settings{Budget: cfg.Agent.Budget, Location: cfg.Location(), Prices: cfg.Usage.Prices, AgentEnv: cfg.Agent.Env}
}

// relayMain gives the main group's run, which is not confined, a relay of
// its own (confine.Relay).
func (r *Router) relayMain(cfg *config.Config, eff security.Effective, spec *runner.Spec, meter gateway.Meter, unanswered chan<- string) (*gateway.Gateway, error) {
	return confine.Relay(confine.Options{Policy: eff, Spec: spec, Upstream: os.Getenv("ANTHROPIC_BASE_URL"), Meter: meter, Log: r.Log,
		Route: r.route(cfg, eff), Routes: r.routes(eff.Group), Unanswered: unanswered})
}

// route is where the group's model requests go, with the failures every
// run shares (a target that failed lately is tried after the others).
func (r *Router) route(cfg *config.Config, eff security.Effective) gateway.Route {
	rt := cfg.Route(eff, os.Getenv("ANTHROPIC_BASE_URL"))
	rt.Board = &r.upstreams
	return rt
}

// routes gives the relay the group's route as it is at each request, so
// that a model set by /model or `groups set-model` during a run applies
// to its next request (the zero route, on a failed read, keeps the run's).
func (r *Router) routes(folder string) func() gateway.Route {
	return func() gateway.Route {
		g, err := r.Groups.ByFolder(context.Background(), folder)
		if err != nil {
			return gateway.Route{}
		}
		cfg := r.Config()
		eff := security.Effective{Group: folder, Model: cfg.Agent.Model, Provider: cfg.Agent.Provider}
		if o := g.Security; o != nil {
			eff.Model = cmp.Or(o.Model, eff.Model)
			eff.Provider = cmp.Or(o.Provider, eff.Provider)
		}
		return r.route(cfg, eff)
	}
}

// errSandboxBroken is what a group is told when the start-time proof
// failed (the details went to the owner).
var errSandboxBroken = errors.New("the sandbox does not hold on this machine; the owner was told")

// failClosed logs and tells the main group that g's agent was not
// started because its sandbox could not be built; the run is not retried.
func (r *Router) failClosed(ctx context.Context, cfg *config.Config, g groups.Group, err error) error {
	r.Log.Error().Err(err).Str("group", g.Folder).Msg("not starting the agent unconfined")
	r.Outbox.TellMain(ctx, fmt.Sprintf("[SANDBOX ALERT] %s: the agent of group %s was not started: %v. Run 'nanoclawd doctor'.",
		cfg.AssistantName, g.Folder, err))
	return runner.NoRetry(err)
}
