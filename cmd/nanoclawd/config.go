package main

import (
	"context"
	"fmt"
	"os"
)

// configCheck is 'nanoclawd config check'.
type configCheck struct{}

func (configCheck) Usage() string { return "config check" }

func (c configCheck) Run(ctx context.Context, g *globals, args []string) error {
	if _, err := g.parse(c, g.flags(), args, 0); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	if _, err := os.Stat(cfg.File); err != nil {
		fmt.Fprintf(g.stdout, "%s: not found; every key has its default (to change them, copy nanoclaw.config.jsonc from the repository there)\n", cfg.File)
		return nil
	}
	fmt.Fprintf(g.stdout, "%s: ok\n", cfg.File)
	return nil
}
