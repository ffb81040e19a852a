package main

import (
	"context"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/doctor"
)

// doctorCommand is 'nanoclawd doctor'.
type doctorCommand struct{}

func (doctorCommand) Usage() string { return "doctor" }

func (c doctorCommand) Run(ctx context.Context, g *globals, args []string) error {
	if _, err := g.parse(c, g.flags(), args, 0); err != nil {
		return err
	}
	failed := 0
	// The config check reads nanoclawd.env first, as the daemon does.
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
