package router

import (
	"os"

	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/runner"
)

// relayMain gives an unconfined run (the main group's) a relay of its own
// on the loopback, so that its model requests are counted and held to a
// budget like every other group's, and its agent holds placeholders, not
// the daemon's credentials. It is not held to network rules, so it has
// no forward proxy. The caller closes the relay when the run has ended.
func (r *Router) relayMain(g groups.Group, spec *runner.Spec, meter gateway.Meter) (*gateway.Run, error) {
	gw, err := gateway.OpenLoopback(gateway.Config{
		Group: g.Folder, Upstream: os.Getenv("ANTHROPIC_BASE_URL"), Secrets: takeCredentials(spec.Env), Meter: meter, Log: r.Log,
	})
	if err != nil {
		return nil, err
	}
	for name, ph := range gw.Env() {
		spec.Env[name] = ph
	}
	spec.Env["ANTHROPIC_BASE_URL"] = gw.URL()
	return gw, nil
}

// takeCredentials removes the model-API credentials from a run's
// environment and returns them, for its relay to add to each request.
func takeCredentials(env map[string]string) map[string]string {
	secrets := map[string]string{}
	for _, name := range gateway.Credentials {
		if v, given := env[name]; given {
			secrets[name] = v
			delete(env, name)
		}
	}
	return secrets
}
