// Package confine builds what holds one agent run: for a non-main group
// its OS sandbox — the plan of what the run sees, its egress gateway, the
// run's user and the directories handed to it, the seccomp launch — and
// the watch on the limits the kernel cannot keep (watch.go); for the main
// group a relay of its own (relay.go). Every run of a group and
// `nanoclawd security test` get the same confinement from New.
package confine

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Options is what New needs to confine one run.
type Options struct {
	Config *config.Config
	Policy security.Effective // the group's resolved policy
	// Spec is the run: its Command is wrapped in the sandbox and its Env
	// loses every real model credential (placeholders instead).
	Spec       *runner.Spec
	SessionDir string
	Binary     string // this nanoclawd: sandbox-init and the MCP server
	Upstream   string // the model API ("" = api.anthropic.com)
	Reporter   security.Reporter
	Meter      gateway.Meter // nil: the run's model requests are not metered
	// Unanswered hears when the run's relay gives up on its upstreams
	// (gateway.Config); nil: nobody ends the attempt for it.
	Unanswered chan<- string
	// Route is where the relay sends the run's model requests (the
	// group's provider and model, the fallbacks); empty: Upstream as the
	// agent asks.
	Route gateway.Route
	// Routes, if set, gives the route of each request (gateway.Config).
	Routes func() gateway.Route
	Log    zerolog.Logger
	// Inside, when set, is what runs in the sandbox in place of the plan's
	// agent command (`security test`'s probe: the same confinement,
	// another program).
	Inside []string
	// Sockets, if set, has the run's gateway socket made ahead.
	Sockets *Sockets
	// Placeholders, if set, keeps the mount points of missing protected
	// names between runs.
	Placeholders *sandbox.Placeholders
}

// Confinement is one run's sandbox: its plan, its gateway and how it is started,
// and the watch on it (watch.go).
type Confinement struct {
	Plan    sandbox.Plan
	Gateway *gateway.Gateway
	Launch  sandbox.Launch

	spec     *runner.Spec
	group    string
	reporter security.Reporter
	log      zerolog.Logger
	kept     *sandbox.Placeholders
	cgroup   *sandbox.RunCgroup // nil where the daemon cannot make one
	disk     diskWatch          // disk.go
	stop     chan struct{}

	mu   sync.Mutex
	over string // the limit the run went over
}

// New builds the confinement of a non-main run, as every run of a group
// and `nanoclawd security test` get it: the plan of what the run sees, its
// gateway, its own directories handed to the run's user, and o.Spec
// rewritten to start inside. Close ends the gateway and tidies up after
// the run.
func New(o Options) (*Confinement, error) {
	cfg, spec := o.Config, o.Spec
	if err := roomToRun(cfg.DataDir, cfg.GroupsDir); err != nil {
		return nil, err
	}
	user := cfg.Agent.RunAs.User()
	if err := sandbox.Shield(cfg.Layout(), user); err != nil {
		return nil, runner.NoRetry(fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err))
	}
	home := cfg.Layout().SessionHome(o.Policy.Group)
	tmp := "/tmp" // the run's private /tmp
	if runtime.GOOS == "darwin" {
		tmp = filepath.Join(o.SessionDir, "tmp") // no private /tmp there: one in the run's own session
	}
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("prepare %s: %w", d, err)
		}
		if d == "/tmp" {
			continue
		}
		// Whatever the umask was a moment ago (the local channel narrows
		// it while it makes its socket).
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("prepare %s: %w", d, err)
		}
	}
	// The run's own dirs become its user's (the daemon, root, still reads
	// them); logs/ and the protected names keep their owner. Before the
	// plan, which looks at what the run's user can reach.
	for _, d := range []struct {
		dir  string
		keep []string
	}{{spec.Dir, []string{layout.LogsDir, ".claude", ".mcp.json"}}, {o.SessionDir, nil}, {spec.IPCDir, nil}} {
		if err := sandbox.HandOver(d.dir, user, d.keep...); err != nil {
			return nil, runner.NoRetry(err)
		}
	}
	socket, ln, err := o.Sockets.take(cfg.Layout().Gateways(), user)
	if err != nil {
		return nil, err
	}
	listen := sandbox.Listen()
	gw, err := gateway.Serve(ln, socket, gateway.Config{
		Group: o.Policy.Group, AllowedDomains: o.Policy.Network.AllowedDomains, DeniedDomains: o.Policy.Network.DeniedDomains,
		Upstream: o.Upstream, Secrets: takeCredentials(spec.Env), Self: listen, Reporter: o.Reporter, Log: o.Log,
		Meter: o.Meter, Route: o.Route, Routes: o.Routes, Tools: o.Policy.Tools, Unanswered: o.Unanswered,
	})
	if err != nil {
		return nil, err
	}
	if user.Switches() {
		// Connecting takes write permission on the socket (made 0600).
		if err := os.Lchown(socket, user.UID, user.GID); err != nil {
			gw.Close()
			return nil, fmt.Errorf("give the gateway socket to the run's user: %w", err)
		}
	}
	// After the gateway: its socket is bound into the sandbox.
	plan := sandbox.ForGroup(o.Policy, cfg.Agent.Limits.SandboxLimits(), user, spec.Command, o.Binary, spec.Dir, o.SessionDir, spec.IPCDir, socket)
	if plan.Listen != listen {
		plan.Listen = listen
		plan.Profile = sandbox.Profile(plan)
	}
	c := &Confinement{Plan: plan, Gateway: gw, spec: spec, group: o.Policy.Group, reporter: o.Reporter, log: o.Log, stop: make(chan struct{}),
		kept: o.Placeholders}
	for name, ph := range gw.Env() {
		spec.Env[name] = ph
	}
	// The runner resolves "~" in what an agent aims at against the owner's
	// home, which is what denyRead names, not against its own.
	spec.Env[protocol.EnvHostHome] = os.Getenv("HOME")
	spec.Env["HOME"] = home
	spec.Env["TMPDIR"] = tmp
	delete(spec.Env, "ANTHROPIC_BASE_URL") // sandbox-init points it at the relay

	inside := plan.Argv
	if o.Inside != nil {
		inside = o.Inside
	}
	launch, err := sandbox.Command(plan, user, inside)
	if err != nil {
		c.Close()
		return nil, runner.NoRetry(err)
	}
	c.Launch = launch
	o.Placeholders.Place(plan)
	spec.Command = launch.Argv
	spec.Lifeline = true // fd 3; launch.Files follow from sandbox.FirstFD
	spec.ExtraFiles = launch.Files
	spec.Credential = launch.Credential()
	return c, nil
}

// Close ends the gateway and tidies up after the run.
func (c *Confinement) Close() {
	c.Gateway.Close()
	c.Launch.Close()
	c.kept.Keep(c.Plan)
}

// gatewaySocket is a fresh socket path for a run's gateway (see
// gateway.SocketPath); when the run is another user, bubblewrap, started
// as that user, must pass through its directory to bind it.
func gatewaySocket(dir string, user sandbox.User) (string, error) {
	socket, err := gateway.SocketPath(dir)
	if err != nil || !user.Switches() {
		return socket, err
	}
	dir = filepath.Dir(socket)
	if err := os.Chown(dir, -1, user.GID); err != nil {
		return "", fmt.Errorf("gateway directory %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o710); err != nil {
		return "", fmt.Errorf("gateway directory %s: %w", dir, err)
	}
	return socket, nil
}
