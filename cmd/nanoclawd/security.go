package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// securityShow is 'nanoclawd security show'.
type securityShow struct{}

func (securityShow) Usage() string { return "security show FOLDER [--json]" }

func (c securityShow) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	asJSON := fs.Bool("json", false, "print JSON: the effective policy, sdkOptions (what the agent runner hands the SDK) and confinement")
	pos, err := g.parse(c, fs, args, 1)
	if err != nil {
		return err
	}
	cfg, list, err := g.listGroups(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(list, func(gr groups.Group) bool { return gr.Folder == pos[0] })
	if i < 0 {
		return fmt.Errorf("%w: %s (see 'nanoclawd groups list')", groups.ErrNotFound, pos[0])
	}
	target := list[i]
	// The same inputs the router resolves with before each run.
	eff := security.Resolve(cfg.HostSecurity, target.Policy(), cfg.SecurityHost(groups.Folders(list)))
	var plan *sandbox.Plan
	if !eff.IsMain {
		bin, _ := os.Executable()
		l := cfg.Layout()
		p := sandbox.ForGroup(eff, cfg.Agent.Limits.SandboxLimits(), cfg.Agent.RunAs.User(), cfg.Agent.Command, bin, l.Group(target.Folder),
			l.Session(target.Folder), string(l.IPC(target.Folder)), "")
		plan = &p
	}
	if *asJSON {
		return writeJSON(g.stdout, struct {
			security.Effective
			Confinement *sandbox.Plan `json:"confinement"`
		}{eff, plan})
	}
	w := g.stdout
	fmt.Fprintf(w, "group:           %s\n", eff.Group)
	model := eff.Model
	if model == "" {
		model = "the SDK's default"
	}
	fmt.Fprintf(w, "model:           %s, provider %s\n", model, eff.Provider)
	if eff.IsMain {
		fmt.Fprintln(w, "main group:      yes, exempt: no sandbox, bypassPermissions, every tool, user and project settings")
	} else {
		override := "none"
		if target.Security != nil {
			override = "yes (nanoclawd groups set-security)"
		}
		fmt.Fprintf(w, "override:        %s\n", override)
		fmt.Fprintf(w, "sandbox:         %v\n", eff.Sandbox)
		fmt.Fprintf(w, "permissionMode:  %s\n", eff.PermissionMode)
		fmt.Fprintf(w, "tools:           %s (+ %s)\n", strings.Join(eff.Tools, ", "), security.NanoclawTools)
		fmt.Fprintf(w, "settingSources:  %s\n", strings.Join(eff.SettingSources, ", "))
		fmt.Fprintf(w, "network allowed: %s\n", listOrNone(eff.Network.AllowedDomains, "no network for commands"))
		fmt.Fprintf(w, "network denied:  %s\n", listOrNone(eff.Network.DeniedDomains, "none"))
		fmt.Fprintf(w, "secrets hidden from commands: %s\n", strings.Join(eff.SecretEnv, ", "))
		fmt.Fprintln(w, "agent.env entering confined runs:")
		for _, v := range eff.Env.Enter {
			fmt.Fprintf(w, "  %s  (%s)\n", v.Name, v.Why)
		}
		fmt.Fprintln(w, "agent.env held back:")
		for _, v := range eff.Env.HeldBack {
			fmt.Fprintf(w, "  %s  (%s)\n", v.Name, v.Why)
		}
		fmt.Fprintln(w, "denyRead:")
		for _, p := range eff.DenyRead {
			fmt.Fprintln(w, "  "+p)
		}
		fmt.Fprintln(w, "denyWrite:")
		for _, p := range eff.DenyWrite {
			fmt.Fprintln(w, "  "+p)
		}
		fmt.Fprintln(w, "allowWrite:")
		for _, p := range eff.AllowWrite {
			fmt.Fprintln(w, "  "+p)
		}
		fmt.Fprintln(w, "confinement: (the OS sandbox of every run; nothing else of the host exists inside)")
		for _, m := range plan.Mounts {
			fmt.Fprintf(w, "  %-6s %s  (%s)\n", m.Mode, m.Path, m.Why)
		}
		fmt.Fprintf(w, "  network: %s; gateway %s\n", plan.Network, plan.Gateway)
		fmt.Fprintf(w, "  run as: uid %d gid %d on the host (never root, never the owner when the daemon runs as root)\n", plan.RunAs.UID, plan.RunAs.GID)
		fmt.Fprintf(w, "  kernel: seccomp filter %s, no nested user namespaces, /dev read-only\n", plan.Seccomp)
		fmt.Fprintf(w, "  limits: %d processes, files up to %d MiB, /tmp %d MiB, /dev/shm %d MiB, memory %d MiB, folder %d MiB\n",
			plan.Limits.Processes, plan.Limits.FileSize>>20, plan.Limits.TmpSize>>20, plan.Limits.ShmSize>>20, plan.Limits.Memory>>20, plan.Limits.Disk>>20)
		for _, pr := range plan.Problems {
			fmt.Fprintf(w, "  PROBLEM %s: %s\n", pr.Path, pr.Why)
		}
		if plan.Profile != "" {
			fmt.Fprintf(w, "  macOS sandbox profile:\n%s", plan.Profile)
		}
	}
	fmt.Fprintln(w, "sdkOptions: (the exact options handed to the Claude Agent SDK; see --json)")
	return nil
}

func listOrNone(l []string, none string) string {
	if len(l) == 0 {
		return none
	}
	return strings.Join(l, ", ")
}
