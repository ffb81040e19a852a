package main

import (
	"context"
	"flag"
)

func init() {
	register("run", "run   the daemon (also the default)", runDaemon)
}

func runDaemon(ctx context.Context, g *globals, args []string) error {
	if _, err := parseFlags(flag.NewFlagSet("run", flag.ContinueOnError), args, 0, 0, "run"); err != nil {
		return err
	}
	cfg, err := g.loadConfig()
	if err != nil {
		return err
	}
	_ = cfg
	<-ctx.Done()
	return nil
}
