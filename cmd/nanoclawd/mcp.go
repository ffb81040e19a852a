package main

import (
	"context"
	"os"

	"github.com/nanoclawd/nanoclawd/internal/ipc/mcpserver"
)

// mcpCommand is 'nanoclawd mcp'.
type mcpCommand struct{}

func (mcpCommand) Usage() string { return "mcp" }

func (c mcpCommand) Run(ctx context.Context, g *globals, args []string) error {
	if _, err := g.parse(c, g.flags(), args, 0); err != nil {
		return err
	}
	return mcpserver.Run(ctx, os.Stdin, os.Stdout)
}
