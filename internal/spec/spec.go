// Package spec says what an agent of a group is started with: its
// command, working directory, environment and ContainerInput (For), the
// directories of its run (DirsOf), and those directories made real
// before it starts (PrepareDirs).
package spec

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Dirs are the directories one run of a group uses.
type Dirs struct {
	Group   string // the group's folder, the agent's working directory
	IPC     string // its IPC directory
	Session string // the agent's session store
	Logs    string // the run logs
}

// DirsOf are the directories of folder's runs.
func DirsOf(cfg *config.Config, folder string) Dirs {
	l := cfg.Layout()
	return Dirs{Group: l.Group(folder), IPC: string(l.IPC(folder)), Session: l.Session(folder), Logs: l.GroupLogs(folder)}
}

// MainClaudeDir is the Claude config dir of the main group's runs, where
// the CLI keeps their transcripts. The main group is the owner's own: its
// runs keep the daemon's HOME (and the owner's user settings), so it is
// CLAUDE_CONFIG_DIR when agent.env passes one, else ~/.claude — not in the
// data dir, which is why backups take it apart. "" without HOME.
func MainClaudeDir(cfg *config.Config, getenv func(name string) (string, bool)) string {
	if slices.Contains(cfg.Agent.Env, "CLAUDE_CONFIG_DIR") {
		if dir, ok := getenv("CLAUDE_CONFIG_DIR"); ok && dir != "" {
			return dir
		}
	}
	if home, ok := getenv("HOME"); ok && home != "" {
		return filepath.Join(home, ".claude")
	}
	return ""
}

// Input is everything an agent is started with, as plain values.
type Input struct {
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

// For says what the runner starts for one run: the command, its
// directories, environment and first input. It only computes; the caller
// makes the directories, issues the token, confines non-main runs and sets
// Spec.Closing.
func For(in Input) (runner.Spec, error) {
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
	p := DirsOf(cfg, g.Folder)
	pe := protocol.Env{GroupFolder: g.Folder, ChatJID: g.JID, IsMain: g.IsMain, GroupDir: p.Group, IPCDir: p.IPC,
		IPCToken: in.Token, Bin: in.Binary, SessionDir: p.Session}
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
		Command: cfg.Agent.Command, Dir: p.Group, Env: env, IPCDir: p.IPC, LogDir: p.Logs,
		Timeout: cfg.Agent.Timeout.D(), IdleTimeout: cfg.Agent.IdleTimeout.D(),
		Input: protocol.ContainerInput{
			Prompt: in.Prompt, SessionID: in.Session, GroupFolder: g.Folder, ChatJID: g.JID, IsMain: g.IsMain,
			IsScheduledTask: in.IsTask, AssistantName: cfg.AssistantName, Security: sec, SDKOptions: sdk,
			Standby: in.Standby,
		},
	}, nil
}

// PrepareDirs makes the directories of a run that its group can write —
// input/, logs/, the session directory and a confined run's HOME in it —
// real directories, through groupfs: a link the group left in place of
// one is removed and reported, never followed (the sandbox binds and the
// daemon writes there next).
func PrepareDirs(ctx context.Context, g groups.Group, p Dirs, reporter security.Reporter) error {
	for _, dir := range []string{layout.IPCDir(p.IPC).Input(), p.Logs} {
		d, err := groupfs.OpenSub(ctx, dir, g.Folder, 0o700, reporter)
		if err != nil {
			return fmt.Errorf("prepare %s: %w", dir, err)
		}
		d.Close()
	}
	session, err := groupfs.Open(p.Session, g.Folder, 0o700, reporter)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", p.Session, err)
	}
	defer session.Close()
	if g.IsMain {
		return nil
	}
	home, err := session.Sub(ctx, layout.SessionHomeDir, 0o700)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", p.Session, err)
	}
	return home.Close()
}
