package main

import (
	"context"
	"flag"
	"os"

	"github.com/nanoclawd/nanoclawd/internal/ipc/mcpserver"
)

func init() {
	register("mcp", "mcp   stdio MCP server with the nanoclaw tools (started by the agent runner)", runMCP)
}

func runMCP(ctx context.Context, g *globals, args []string) error {
	if _, err := parseFlags(flag.NewFlagSet("mcp", flag.ContinueOnError), args, 0, 0, "mcp"); err != nil {
		return err
	}
	return mcpserver.Run(ctx, os.Stdin, os.Stdout)
}
