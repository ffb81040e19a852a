package router

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

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

// confine puts a non-main run in its OS sandbox: spec's command is wrapped,
// its environment loses every real credential (placeholders instead, good
// only through this run's gateway), and the gateway is started. The
// returned func ends the gateway and tidies up after the run. If the
// sandbox cannot be built the run fails closed and the main group is told.
func (r *Router) confine(ctx context.Context, cfg *config.Config, g groups.Group, eff security.Effective, spec *runner.Spec, sessionDir string, meter gateway.Meter) (*confinement, error) {
	user := cfg.Agent.RunAs.User()
	if err := sandbox.Probe(ctx, user); err != nil {
		return nil, r.failClosed(ctx, cfg, g, err)
	}
	if err := sandbox.Shield(cfg.Layout(), user); err != nil {
		return nil, runner.NoRetry(fmt.Errorf("%w: %w", sandbox.ErrUnavailable, err))
	}
	socket, err := gatewaySocket(cfg.Layout().Gateways(), user)
	if err != nil {
		return nil, err
	}
	gw, err := gateway.Open(socket, gateway.Config{
		Group: g.Folder, AllowedDomains: eff.Network.AllowedDomains, DeniedDomains: eff.Network.DeniedDomains,
		Upstream: os.Getenv("ANTHROPIC_BASE_URL"), Secrets: takeCredentials(spec.Env), Reporter: r.Reporter, Log: r.Log,
		Meter: meter,
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
	for name, ph := range gw.Env() {
		spec.Env[name] = ph
	}
	home := cfg.Layout().SessionHome(g.Folder)
	if err := os.MkdirAll(home, 0o700); err != nil {
		gw.Close()
		return nil, fmt.Errorf("prepare %s: %w", home, err)
	}
	// The run's own dirs become its user's (the daemon, root, still reads
	// them); logs/ and the protected names keep their owner.
	for _, d := range []struct {
		dir  string
		keep []string
	}{{spec.Dir, []string{layout.LogsDir, ".claude", ".mcp.json"}}, {sessionDir, nil}, {spec.IPCDir, nil}} {
		if err := sandbox.HandOver(d.dir, user, d.keep...); err != nil {
			gw.Close()
			return nil, runner.NoRetry(err)
		}
	}
	// The runner resolves "~" in what an agent aims at against the owner's
	// home, which is what denyRead names, not against its own.
	spec.Env[protocol.EnvHostHome] = os.Getenv("HOME")
	spec.Env["HOME"] = home
	spec.Env["TMPDIR"] = "/tmp"
	delete(spec.Env, "ANTHROPIC_BASE_URL") // sandbox-init points it at the relay

	plan := sandbox.ForGroup(eff, cfg.Agent.Limits.SandboxLimits(), user, spec.Command, r.Binary, spec.Dir, sessionDir, spec.IPCDir, socket)
	launch, err := sandbox.Command(plan, r.Binary, user, plan.Argv)
	if err != nil {
		gw.Close()
		return nil, r.failClosed(ctx, cfg, g, err)
	}
	spec.Command = launch.Argv
	spec.Lifeline = true // fd 3; launch.Files follow from sandbox.FirstFD
	spec.ExtraFiles = launch.Files
	spec.Credential = launch.Credential()
	c := &confinement{router: r, group: g.Folder, plan: plan, gw: gw, launch: launch, stop: make(chan struct{})}
	if plan.Limits.Memory > 0 {
		// A cgroup's limit counts shared memory too; where the daemon
		// cannot make one, the watch measures resident memory alone.
		cg, err := sandbox.NewRunCgroup("run-"+g.Folder+"-"+filepath.Base(socket), plan.Limits.Memory)
		if err != nil {
			r.Log.Debug().Err(err).Str("group", g.Folder).Msg("no memory cgroup for the run")
		} else {
			c.cgroup, spec.CgroupFD = cg, cg.FD
		}
	}
	return c, nil
}

// failClosed logs and tells the main group that g's agent was not
// started because its sandbox could not be built; the run is not retried.
func (r *Router) failClosed(ctx context.Context, cfg *config.Config, g groups.Group, err error) error {
	r.Log.Error().Err(err).Str("group", g.Folder).Msg("not starting the agent unconfined")
	r.tellMain(ctx, fmt.Sprintf("[SANDBOX ALERT] %s: the agent of group %s was not started: %v. Run 'nanoclawd doctor'.",
		cfg.AssistantName, g.Folder, err))
	return runner.NoRetry(err)
}

// confinement is one confined run: its plan, its gateway, and the watch
// on what the kernel cannot limit (memory, disk).
type confinement struct {
	router *Router
	group  string
	plan   sandbox.Plan
	gw     *gateway.Run
	launch sandbox.Launch
	cgroup *sandbox.RunCgroup // nil where the daemon cannot make one
	stop   chan struct{}

	mu   sync.Mutex
	over string // the limit the run went over
}

// started watches the run whose sandbox has process id pid; a run that
// goes over a limit is reported and its processes are killed.
func (c *confinement) started(pid int) {
	go sandbox.Watch(pid, c.plan.Workdir, c.plan.Limits, c.stop, func(what string) {
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
	c.gw.Close()
	c.launch.Close()
	if c.cgroup != nil {
		if c.cgroup.OOMKilled() && c.exceeded() == "" {
			c.overLimit(fmt.Sprintf("memory: the run's memory, shared memory included, went over its limit of %d MiB", c.plan.Limits.Memory>>20))
		}
		c.cgroup.Close()
	}
	sandbox.Cleanup(c.plan)
	var writable []string
	for _, m := range c.plan.Mounts {
		if m.Mode == sandbox.ReadWrite && m.Dir {
			writable = append(writable, m.Path)
		}
	}
	for _, f := range sandbox.Sweep(writable, c.launch.User) {
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
