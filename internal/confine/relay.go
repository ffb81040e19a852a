package confine

import (
	"github.com/nanoclawd/nanoclawd/internal/gateway"
)

// Relay gives an unconfined run (the main group's) a relay of its own on
// the loopback, so that its model requests are counted and held to a
// budget like every other group's, and its agent holds placeholders, not
// the daemon's credentials. It is not held to network rules, so it has no
// forward proxy; of o it takes the policy's group, the spec, the upstream,
// the meter, Unanswered and the log. The caller closes the relay when the run has
// ended.
func Relay(o Options) (*gateway.Gateway, error) {
	spec := o.Spec
	gw, err := gateway.OpenLoopback(gateway.Config{
		Group: o.Policy.Group, Upstream: o.Upstream, Secrets: takeCredentials(spec.Env), Meter: o.Meter, Log: o.Log, Route: o.Route, Routes: o.Routes,
		Unanswered: o.Unanswered,
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
