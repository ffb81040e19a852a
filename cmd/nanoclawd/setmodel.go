package main

import (
	"context"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/approvals"
)

// groupsSetModel is 'nanoclawd groups set-model'.
type groupsSetModel struct{}

func (groupsSetModel) Usage() string { return "groups set-model FOLDER MODEL | --clear" }

func (c groupsSetModel) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	clear := fs.Bool("clear", false, "remove the group's own model: it follows agent.model again")
	pos, err := g.parse(c, fs, args, -1)
	if err != nil {
		return err
	}
	if len(pos) < 1 || len(pos) > 2 || (len(pos) == 2) == *clear {
		return g.usageError(c, "give FOLDER and exactly one of MODEL or --clear")
	}
	cfg, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	gr, err := reg.ByFolder(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("%w: %s (see 'nanoclawd groups list')", err, pos[0])
	}
	model := ""
	if !*clear {
		model = pos[1]
		if err := cfg.CheckModel(model); err != nil {
			return fmt.Errorf("%w; nothing changed", err)
		}
	}
	before := approvals.ModelOf(gr.Security, cfg.Agent.Model)
	if err := reg.SetSecurity(ctx, gr.Folder, gr.Security.WithModel(model)); err != nil {
		return err
	}
	notifyDaemon(cfg)
	fmt.Fprintf(g.stdout, "%s now uses %s (was %s), from its next model request\n", gr.Folder, approvals.ModelOf(gr.Security.WithModel(model), cfg.Agent.Model), before)
	return nil
}
