package main

import (
	"context"
	"flag"

	"github.com/nanoclawd/nanoclawd/internal/status"
)

func init() {
	register("status", "status [--json]   what the running daemon is doing: channels, agents, outbox, next tasks, violations", runStatus)
}

func runStatus(ctx context.Context, g *globals, args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "")
	if _, err := parseFlags(fs, args, 0, 0, "status [--json]"); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	rep, err := status.Fetch(ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(g.stdout, rep)
	}
	return status.Format(g.stdout, rep)
}
