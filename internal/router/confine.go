package router

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	if err := sandbox.Probe(ctx); err != nil {
		r.Log.Error().Err(err).Str("group", g.Folder).Msg("not starting the agent unconfined")
		r.tellMain(ctx, fmt.Sprintf("[SANDBOX ALERT] %s: the agent of group %s was not started: %v. Run 'nanoclawd doctor'.",
			cfg.AssistantName, g.Folder, err))
		return nil, runner.NoRetry(err)
	}
	socket, err := gatewaySocket(cfg.Layout().Gateways())
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
	for name, ph := range gw.Env() {
		spec.Env[name] = ph
	}
	home := cfg.Layout().SessionHome(g.Folder)
	if err := os.MkdirAll(home, 0o700); err != nil {
		gw.Close()
		return nil, fmt.Errorf("prepare %s: %w", home, err)
	}
	// The runner resolves "~" in what an agent aims at against the owner's
	// home, which is what denyRead names, not against its own.
	spec.Env[protocol.EnvHostHome] = os.Getenv("HOME")
	spec.Env["HOME"] = home
	spec.Env["TMPDIR"] = "/tmp"
	delete(spec.Env, "ANTHROPIC_BASE_URL") // sandbox-init points it at the relay

	plan := sandbox.ForGroup(eff, cfg.Agent.Limits.SandboxLimits(), spec.Command, r.Binary, spec.Dir, sessionDir, spec.IPCDir, socket)
	cmd, err := sandbox.Command(plan, r.Binary, os.Getuid(), plan.Argv)
	if err != nil {
		gw.Close()
		return nil, runner.NoRetry(err)
	}
	spec.Command = cmd
	spec.Lifeline = true
	return &confinement{router: r, group: g.Folder, plan: plan, gw: gw, stop: make(chan struct{})}, nil
}

// confinement is one confined run: its plan, its gateway, and the watch
// on what the kernel cannot limit (memory, disk).
type confinement struct {
	router *Router
	group  string
	plan   sandbox.Plan
	gw     *gateway.Run
	stop   chan struct{}

	mu   sync.Mutex
	over string // the limit the run went over
}

// started watches the run whose sandbox has process id pid; a run that
// goes over a limit is reported and its processes are killed.
func (c *confinement) started(pid int) {
	go sandbox.Watch(pid, c.plan.Workdir, c.plan.Limits, c.stop, func(what string) {
		c.mu.Lock()
		c.over = what
		c.mu.Unlock()
		limit, _, _ := strings.Cut(what, ":")
		v := security.Violation{Time: time.Now().UTC(), Group: c.group, Kind: security.KindLimit, Tool: "sandbox", Target: limit,
			Detail: what, Action: "blocked", Rule: "agent.limits"}
		if err := c.router.Reporter.Report(context.Background(), v); err != nil {
			c.router.Log.Error().Err(err).Str("group", c.group).Msg("report a run over its limit")
		}
		syscall.Kill(-pid, syscall.SIGKILL)
	})
}

// exceeded is the limit the run went over, or "".
func (c *confinement) exceeded() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.over
}

// done ends the gateway and the watch and tidies up after the run.
func (c *confinement) done() {
	close(c.stop)
	c.gw.Close()
	sandbox.Cleanup(c.plan)
}

// gatewaySocket is a fresh socket path for a run's gateway: in dir (the
// layout's gateways directory), or, when that path would be too long for a
// Unix socket, under a private directory in /tmp.
func gatewaySocket(dir string) (string, error) {
	b := make([]byte, 6)
	rand.Read(b)
	name := hex.EncodeToString(b) + ".sock"
	if len(filepath.Join(dir, name)) > 100 {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("nanoclawd-%d", os.Getuid()))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("gateway directory %s: %w", dir, err)
	}
	return filepath.Join(dir, name), nil
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
