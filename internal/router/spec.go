package router

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// runPaths are the directories one run of a group uses.
type runPaths struct {
	group   string // the group's folder, the agent's working directory
	ipc     string // its IPC directory
	session string // the agent's session store
	logs    string // the run logs
}

func pathsOf(cfg *config.Config, folder string) runPaths {
	l := cfg.Layout()
	return runPaths{group: l.Group(folder), ipc: string(l.IPC(folder)), session: l.Session(folder), logs: l.GroupLogs(folder)}
}

// specInput is everything an agent is started with, as plain values.
type specInput struct {
	Group   groups.Group
	Config  *config.Config
	Policy  security.Effective
	Prompt  string // "" for a standby
	IsTask  bool
	Standby bool   // started ahead: it waits for its first prompt
	Session string // the session to resume; "" starts a fresh one
	Token   string // the run's IPC secret
	Binary  string // this nanoclawd, for the agent's MCP server
	// Getenv reads the daemon's environment, for the variables agent.env
	// passes through.
	Getenv func(name string) (string, bool)
}

// agentSpec says what the runner starts for one run: the command, its
// directories, environment and first input. It only computes; the caller
// makes the directories, issues the token, confines non-main runs and sets
// Spec.Closing.
func agentSpec(in specInput) (runner.Spec, error) {
	g, cfg := in.Group, in.Config
	sdk, err := json.Marshal(in.Policy.SDKOptions)
	if err != nil {
		return runner.Spec{}, fmt.Errorf("encode the SDK options of %s: %w", g.Folder, err)
	}
	var sec json.RawMessage
	if !g.IsMain {
		pol := in.Policy
		pol.SDKOptions = nil
		if sec, err = json.Marshal(pol); err != nil {
			return runner.Spec{}, fmt.Errorf("encode the policy of %s: %w", g.Folder, err)
		}
	}
	p := pathsOf(cfg, g.Folder)
	pe := protocol.Env{GroupFolder: g.Folder, ChatJID: g.JID, IsMain: g.IsMain, GroupDir: p.group, IPCDir: p.ipc,
		IPCToken: in.Token, Bin: in.Binary, SessionDir: p.session}
	if !g.IsMain {
		pe.GlobalMemory = cfg.Layout().GlobalMemory()
	}
	env := pe.Vars()
	for _, name := range cfg.Agent.Env {
		if !in.Policy.Passes(name) {
			continue // a secret kept out of a confined run
		}
		if v, ok := in.Getenv(name); ok {
			env[name] = v
		}
	}
	if cfg.Timezone != "" {
		env["TZ"] = cfg.Timezone // the agent's clock reads as the group's
	}
	return runner.Spec{
		Command: cfg.Agent.Command, Dir: p.group, Env: env, IPCDir: p.ipc, LogDir: p.logs,
		Timeout: cfg.Agent.Timeout.D(), IdleTimeout: cfg.Agent.IdleTimeout.D(),
		Input: protocol.ContainerInput{
			Prompt: in.Prompt, SessionID: in.Session, GroupFolder: g.Folder, ChatJID: g.JID, IsMain: g.IsMain,
			IsScheduledTask: in.IsTask, AssistantName: cfg.AssistantName, Security: sec, SDKOptions: sdk,
			Standby: in.Standby,
		},
	}, nil
}

// prepareDirs makes the directories of a run that its group can write —
// input/, logs/, the session directory and a confined run's HOME in it —
// real directories, through groupfs: a link the group left in place of
// one is removed and reported, never followed (the sandbox binds and the
// daemon writes there next).
func (r *Router) prepareDirs(ctx context.Context, g groups.Group, p runPaths) error {
	for _, dir := range []string{layout.IPCDir(p.ipc).Input(), p.logs} {
		d, err := groupfs.OpenSub(ctx, dir, g.Folder, 0o700, r.Reporter)
		if err != nil {
			return fmt.Errorf("prepare %s: %w", dir, err)
		}
		d.Close()
	}
	session, err := groupfs.Open(p.session, g.Folder, 0o700, r.Reporter)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", p.session, err)
	}
	defer session.Close()
	if g.IsMain {
		return nil
	}
	home, err := session.Sub(ctx, layout.SessionHomeDir, 0o700)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", p.session, err)
	}
	return home.Close()
}

// fingerprint sums up everything a run of g is started with but its
// prompt: a standby is used only when it is still the same.
func (r *Router) fingerprint(ctx context.Context, g groups.Group, useSession bool) (string, error) {
	cfg := r.Config()
	list, err := r.Groups.List(ctx)
	if err != nil {
		return "", err
	}
	eff := security.Resolve(cfg.HostSecurity, g.Policy(), cfg.SecurityHost(groups.Folders(list)))
	session := ""
	if useSession {
		if session, err = r.Messages.Session(ctx, g.Folder); err != nil {
			return "", err
		}
	}
	b, err := json.Marshal([]any{eff, cfg.Agent, cfg.AssistantName, cfg.Timezone, g, session})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
