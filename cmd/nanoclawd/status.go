package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/nanoclawd/nanoclawd/internal/status"
)

// statusCommand is 'nanoclawd status'.
type statusCommand struct{}

func (statusCommand) Usage() string { return "status [--json]" }

func (c statusCommand) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	rep, err := status.Fetch(ctx, cfg.DataDir)
	if errors.Is(err, status.ErrNotRunning) {
		if _, serr := os.Stat(cfg.File); errors.Is(serr, os.ErrNotExist) {
			// Run from elsewhere: the defaults' data dir is not the install's.
			return fmt.Errorf("no config %s here, so status asked the daemon of the default data dir %s: %w; run status in the nanoclawd checkout, or pass --config FILE", cfg.File, cfg.DataDir, status.ErrNotRunning)
		}
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(g.stdout, rep)
	}
	return status.Format(g.stdout, rep)
}
