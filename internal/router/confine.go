package router

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
	"github.com/rs/zerolog"
)

// confine puts a non-main run in its OS sandbox (Confine). If the sandbox
// cannot be built, or the start-time proof found a boundary broken, the
// run fails closed and the main group is told.
func (r *Router) confine(ctx context.Context, cfg *config.Config, g groups.Group, eff security.Effective, spec *runner.Spec, sessionDir string) (*confinement, error) {
	if err := sandbox.Probe(ctx); err != nil {
		r.Log.Error().Err(err).Str("group", g.Folder).Msg("not starting the agent unconfined")
		r.tellMain(ctx, fmt.Sprintf("[SANDBOX ALERT] %s: the agent of group %s was not started: %v. Run 'nanoclawd doctor'.",
			cfg.AssistantName, g.Folder, err))
		return nil, runner.NoRetry(err)
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
		Upstream: os.Getenv("ANTHROPIC_BASE_URL"), Reporter: r.Reporter, Log: r.Log,
	})
	if err != nil {
		return nil, err
	}
	return &confinement{Confined: c, router: r, group: g.Folder, stop: make(chan struct{})}, nil
}

// errSandboxBroken is what a group is told when the start-time proof
// failed (the details went to the owner).
var errSandboxBroken = errors.New("the sandbox does not hold on this machine; the owner was told")

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
	Log        zerolog.Logger
	// Inside, when set, is what runs in the sandbox in place of the plan's
	// agent command (`security test`'s probe: the same confinement,
	// another program).
	Inside []string
}

// Confined is one run's sandbox: its plan and its gateway.
type Confined struct {
	Plan    sandbox.Plan
	Gateway *gateway.Run
}

// Confine builds the confinement of a non-main run, as every run of a
// group and `nanoclawd security test` get it: the plan of what the run
// sees, its gateway, and spec rewritten to start inside. Close ends the
// gateway and tidies up after the run.
func Confine(in Confinement) (*Confined, error) {
	cfg, spec := in.Config, in.Spec
	socket, err := gatewaySocket(cfg.Layout().Gateways())
	if err != nil {
		return nil, err
	}
	secrets := map[string]string{}
	for _, name := range gateway.Credentials {
		if _, given := spec.Env[name]; given {
			secrets[name] = spec.Env[name]
			delete(spec.Env, name)
		}
	}
	listen := sandbox.Listen()
	gw, err := gateway.Open(socket, gateway.Config{
		Group: in.Policy.Group, AllowedDomains: in.Policy.Network.AllowedDomains, DeniedDomains: in.Policy.Network.DeniedDomains,
		Upstream: in.Upstream, Secrets: secrets, Self: listen, Reporter: in.Reporter, Log: in.Log,
	})
	if err != nil {
		return nil, err
	}
	// After the gateway: its socket is bound into the sandbox.
	plan := sandbox.ForGroup(in.Policy, cfg.Agent.Limits.SandboxLimits(), spec.Command, in.Binary, spec.Dir, in.SessionDir, spec.IPCDir, socket)
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
	cmd, err := sandbox.Command(plan, in.Binary, os.Getuid(), inside)
	if err != nil {
		c.Close()
		return nil, runner.NoRetry(err)
	}
	spec.Command = cmd
	spec.Lifeline = true
	return c, nil
}

// Close ends the gateway and tidies up after the run.
func (c *Confined) Close() {
	c.Gateway.Close()
	sandbox.Cleanup(c.Plan)
}

// confinement is one confined run: its plan, its gateway, and the watch
// on what the kernel cannot limit (memory, disk).
type confinement struct {
	*Confined
	router *Router
	group  string
	stop   chan struct{}

	mu   sync.Mutex
	over string // the limit the run went over
}

// started watches the run whose sandbox has process id pid; a run that
// goes over a limit is reported and its processes are killed.
func (c *confinement) started(pid int) {
	go sandbox.Watch(pid, c.Plan.Workdir, c.Plan.Limits, c.stop, func(what string) {
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
	c.Close()
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
