package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/doctor"
)

func init() {
	register("doctor", "doctor   check everything a run needs and say how to fix what is missing", runDoctor)
}

func runDoctor(ctx context.Context, g *globals, args []string) error {
	if _, err := parseFlags(flag.NewFlagSet("doctor", flag.ContinueOnError), args, 0, 0, "doctor"); err != nil {
		return err
	}
	failed := 0
	for _, r := range doctor.Run(ctx, g.configPath, doctor.System()) {
		fmt.Fprintln(g.stdout, r)
		if !r.OK {
			failed++
		}
	}
	if failed > 0 {
		return exitCode{code: 1, err: fmt.Errorf("%d check(s) need fixing: see the FIX lines above", failed)}
	}
	return nil
}
