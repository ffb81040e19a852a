package main

import (
	"context"
	"flag"
	"fmt"
	"os"
)

func init() {
	register("config check", "config check   validate the config file", configCheck)
}

func configCheck(ctx context.Context, g *globals, args []string) error {
	if _, err := parseFlags(flag.NewFlagSet("config check", flag.ContinueOnError), args, 0, 0, "config check"); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	if _, err := os.Stat(cfg.File); err != nil {
		fmt.Fprintf(g.stdout, "%s: not found; every key has its default (copy nanoclaw.config.jsonc from the repo to change them)\n", cfg.File)
		return nil
	}
	fmt.Fprintf(g.stdout, "%s: ok\n", cfg.File)
	return nil
}
