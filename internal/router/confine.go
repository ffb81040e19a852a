package router

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/gateway"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// confine puts a non-main run in its OS sandbox (Confine), its model
// requests metered by meter. If the sandbox cannot be built, or the
// start-time proof found a boundary broken, the run fails closed and the
// main group is told.
func (r *Router) confine(ctx context.Context, cfg *config.Config, g groups.Group, eff security.Effective, spec *runner.Spec, sessionDir string, meter gateway.Meter) (*confinement, error) {
	user := cfg.Agent.RunAs.User()
	if err := sandbox.Probe(ctx, user); err != nil {
		return nil, r.failClosed(ctx, cfg, g, err)
	}
	if r.Proof != nil {
		// The daemon told the main chat once when the proof failed.
		if err := r.Proof.Wait(ctx); err != nil {
			r.Log.Error().Err(err).Str("group", g.Folder).Msg("not starting the agent in a sandbox that does not hold")
			return nil, runner.NoRetry(errSandboxBroken)
		}
	}
	c, err := Confine(Confinement{
		Config: cfg, Policy: eff, Spec: spec, SessionDir: sessionDir, Binary: r.Binary,
		Upstream: os.Getenv("ANTHROPIC_BASE_URL"), Reporter: r.Reporter, Meter: meter, Log: r.Log,
	})
	if errors.Is(err, sandbox.ErrUnavailable) {
		return nil, r.failClosed(ctx, cfg, g, err)
	}
	if err != nil {
		return nil, err
	}
	conf := &confinement{Confined: c, router: r, group: g.Folder, stop: make(chan struct{})}
	if c.Plan.Limits.Memory > 0 {
		// A cgroup's limit counts shared memory too; where the daemon
		// cannot make one, the watch measures resident memory alone.
		cg, err := sandbox.NewRunCgroup("run-"+g.Folder+"-"+filepath.Base(c.Plan.Socket), c.Plan.Limits.Memory)
		if err != nil {
			r.Log.Debug().Err(err).Str("group", g.Folder).Msg("no memory cgroup for the run")
		} else {
			conf.cgroup, spec.CgroupFD = cg, cg.FD
		}
	}
	return conf, nil
}

// errSandboxBroken is what a group is told when the start-time proof
// failed (the details went to the owner).
var errSandboxBroken = errors.New("the sandbox does not hold on this machine; the owner was told")

// failClosed logs and tells the main group that g's agent was not
// started because its sandbox could not be built; the run is not retried.
func (r *Router) failClosed(ctx context.Context, cfg *config.Config, g groups.Group, err error) error {
	r.Log.Error().Err(err).Str("group", g.Folder).Msg("not starting the agent unconfined")
	r.tellMain(ctx, fmt.Sprintf("[SANDBOX ALERT] %s: the agent of group %s was not started: %v. Run 'nanoclawd doctor'.",
		cfg.AssistantName, g.Folder, err))
	return runner.NoRetry(err)
}

// Confinement is what Confine needs to confine one run.
type Confinement struct {
	Config *config.Config
	Policy security.Effective // the group's resolved policy
	// Spec is the run: its Command is wrapped in the sandbox and its Env
	// loses every real model credential (placeholders instead).
	Spec       *runner.Spec
	SessionDir string
	Binary     string // this nanoclawd: sandbox-init and the MCP server
	Upstream   string // the model API ("" = api.anthropic.com)
	Reporter   gateway.Reporter
	Meter      gateway.Meter // nil: the run's model requests are not metered
	Log        zerolog.Logger
	// Inside, when set, is what runs in the sandbox in place of the plan's
	// agent command (`security test`'s probe: the same confinement,
	// another program).
	Inside []string
}

// Confined is one run's sandbox: its plan, its gateway and how it is
// started.
type Confined struct {
	Plan    sandbox.Plan
	Gateway *gateway.Run
	Launch  sandbox.Launch
}

// Confine builds the confinement of a non-main run, as every run of a
// group and `nanoclawd security test` get it: the plan of what the run
// sees, its gateway, its own directories handed to the run's user, and
// spec rewritten to start inside. Close ends the gateway and tidies up
// after the run.
func Confine(in Confinement) (*Confined, error) {
	cfg, spec := in.Config, in.Spec
	user := cfg.Agent.RunAs.User()
	if err := sandbox.Shield(cfg.Layout(), user); err != nil {
		return nil, runner.NoRetry(fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err))
	}
	socket, err := gatewaySocket(cfg.Layout().Gateways(), user)
	if err != nil {
		return nil, err
	}
	listen := sandbox.Listen()
	gw, err := gateway.Open(socket, gateway.Config{
		Group: in.Policy.Group, AllowedDomains: in.Policy.Network.AllowedDomains, DeniedDomains: in.Policy.Network.DeniedDomains,
		Upstream: in.Upstream, Secrets: takeCredentials(spec.Env), Self: listen, Reporter: in.Reporter, Log: in.Log,
		Meter: in.Meter,
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
	plan := sandbox.ForGroup(in.Policy, cfg.Agent.Limits.SandboxLimits(), user, spec.Command, in.Binary, spec.Dir, in.SessionDir, spec.IPCDir, socket)
	if plan.Listen != listen {
		plan.Listen = listen
		plan.Profile = sandbox.Profile(plan)
	}
	c := &Confined{Plan: plan, Gateway: gw}
	for name, ph := range gw.Env() {
		spec.Env[name] = ph
	}
	home := cfg.Layout().SessionHome(in.Policy.Group)
	tmp := "/tmp" // the run's private /tmp
	if runtime.GOOS == "darwin" {
		tmp = filepath.Join(in.SessionDir, "tmp") // no private /tmp there: one in the run's own session
	}
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			c.Close()
			return nil, fmt.Errorf("prepare %s: %w", d, err)
		}
		if d == "/tmp" {
			continue
		}
		// Whatever the umask was a moment ago (the local channel narrows
		// it while it makes its socket).
		if err := os.Chmod(d, 0o700); err != nil {
			c.Close()
			return nil, fmt.Errorf("prepare %s: %w", d, err)
		}
	}
	// The run's own dirs become its user's (the daemon, root, still reads
	// them); logs/ and the protected names keep their owner.
	for _, d := range []struct {
		dir  string
		keep []string
	}{{spec.Dir, []string{layout.LogsDir, ".claude", ".mcp.json"}}, {in.SessionDir, nil}, {spec.IPCDir, nil}} {
		if err := sandbox.HandOver(d.dir, user, d.keep...); err != nil {
			c.Close()
			return nil, runner.NoRetry(err)
		}
	}
	// The runner resolves "~" in what an agent aims at against the owner's
	// home, which is what denyRead names, not against its own.
	spec.Env[protocol.EnvHostHome] = os.Getenv("HOME")
	spec.Env["HOME"] = home
	spec.Env["TMPDIR"] = tmp
	delete(spec.Env, "ANTHROPIC_BASE_URL") // sandbox-init points it at the relay

	inside := plan.Argv
	if in.Inside != nil {
		inside = in.Inside
	}
	launch, err := sandbox.Command(plan, in.Binary, user, inside)
	if err != nil {
		c.Close()
		return nil, runner.NoRetry(err)
	}
	c.Launch = launch
	spec.Command = launch.Argv
	spec.Lifeline = true // fd 3; launch.Files follow from sandbox.FirstFD
	spec.ExtraFiles = launch.Files
	spec.Credential = launch.Credential()
	return c, nil
}

// Close ends the gateway and tidies up after the run.
func (c *Confined) Close() {
	c.Gateway.Close()
	c.Launch.Close()
	sandbox.Cleanup(c.Plan)
}

// confinement is one confined run: its sandbox, and the watch on what the
// kernel cannot limit (memory, disk).
type confinement struct {
	*Confined
	router *Router
	group  string
	cgroup *sandbox.RunCgroup // nil where the daemon cannot make one
	stop   chan struct{}

	mu   sync.Mutex
	over string // the limit the run went over
}

// started watches the run whose sandbox has process id pid; a run that
// goes over a limit is reported and its processes are killed.
func (c *confinement) started(pid int) {
	go sandbox.Watch(pid, c.Plan.Workdir, c.Plan.Limits, c.stop, func(what string) {
		c.overLimit(what)
		syscall.Kill(-pid, syscall.SIGKILL)
	})
}

// overLimit records and reports that the run went over a limit.
func (c *confinement) overLimit(what string) {
	c.mu.Lock()
	c.over = what
	c.mu.Unlock()
	limit, _, _ := strings.Cut(what, ":")
	v := security.Violation{Time: time.Now().UTC(), Group: c.group, Kind: security.KindLimit, Tool: "sandbox", Target: limit,
		Detail: what, Action: "blocked", Rule: "agent.limits"}
	if err := c.router.Reporter.Report(context.Background(), v); err != nil {
		c.router.Log.Error().Err(err).Str("group", c.group).Msg("report a run over its limit")
	}
}

// exceeded is the limit the run went over, or "".
func (c *confinement) exceeded() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.over
}

// done ends the gateway and the watch and tidies up after the run: no
// file the run made keeps a setuid or setgid bit (the seccomp filter
// refuses to set one; each found anyway is cleared and reported).
func (c *confinement) done() {
	close(c.stop)
	if c.cgroup != nil {
		if c.cgroup.OOMKilled() && c.exceeded() == "" {
			c.overLimit(fmt.Sprintf("memory: the run's memory, shared memory included, went over its limit of %d MiB", c.Plan.Limits.Memory>>20))
		}
		c.cgroup.Close()
	}
	c.Close()
	var writable []string
	for _, m := range c.Plan.Mounts {
		if m.Mode == sandbox.ReadWrite && m.Dir {
			writable = append(writable, m.Path)
		}
	}
	for _, f := range sandbox.Sweep(writable, c.Launch.User) {
		v := security.Violation{Time: time.Now().UTC(), Group: c.group, Kind: security.KindFilesystem, Tool: "sandbox", Target: f,
			Detail: "a file the run made had a setuid or setgid bit; the bit was cleared", Action: "blocked", Rule: "no setuid files"}
		if err := c.router.Reporter.Report(context.Background(), v); err != nil {
			c.router.Log.Error().Err(err).Str("group", c.group).Msg("report a setuid file")
		}
	}
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

// tellMain queues a notice for the main group's chat.
func (r *Router) tellMain(ctx context.Context, text string) {
	list, err := r.Groups.List(ctx)
	if err != nil {
		return
	}
	for _, g := range list {
		if g.IsMain {
			if err := r.Messages.Answer(context.WithoutCancel(ctx), r.Outbox, messages.Answer{ReplyTo: g.JID, Text: text, Kind: outbox.KindNotice}); err != nil {
				r.Log.Error().Err(err).Msg("tell the main group")
			}
			return
		}
	}
}
