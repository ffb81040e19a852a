// Command nanoclawd runs a personal Claude assistant in WhatsApp group
// chats, with a sandbox policy per group. main only finds the verb, wires
// signals to a context and hands over to the command.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nanoclawd/nanoclawd/internal/sandbox"
)

// command is one verb (or "noun verb") of the CLI.
type command struct {
	usage string
	run   func(ctx context.Context, g *globals, args []string) error
}

var commands = map[string]command{}

func register(name, usage string, run func(context.Context, *globals, []string) error) {
	commands[name] = command{usage: usage, run: run}
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sandbox-init" {
		// The first process inside an agent's sandbox, started by the
		// daemon: it handles its own signals and exits with the agent's status.
		os.Exit(sandbox.Init(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Main(ctx, os.Args[1:])
	stop()
	if err != nil {
		var ec exitCode
		if errors.As(err, &ec) {
			if ec.err != nil {
				fmt.Fprintln(os.Stderr, "nanoclawd:", ec.err)
			}
			os.Exit(ec.code)
		}
		if !errors.Is(err, errPrinted) {
			fmt.Fprintln(os.Stderr, "nanoclawd:", err)
		}
		os.Exit(1)
	}
}

// Main runs the command line args (without the program name).
func Main(ctx context.Context, args []string) error {
	g, rest, err := parseGlobals(args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		rest = []string{"run"}
	}
	if rest[0] == "help" || rest[0] == "-h" || rest[0] == "--help" {
		printUsage()
		return nil
	}
	// Two-word commands ("groups add") first, then one-word ones.
	if len(rest) > 1 {
		if c, ok := commands[rest[0]+" "+rest[1]]; ok {
			return c.run(ctx, g, rest[2:])
		}
	}
	if c, ok := commands[rest[0]]; ok {
		return c.run(ctx, g, rest[1:])
	}
	return fmt.Errorf("unknown command %q: run 'nanoclawd help' for the list", joinFirst(rest))
}

func joinFirst(rest []string) string {
	if len(rest) > 1 && !isFlag(rest[1]) {
		return rest[0] + " " + rest[1]
	}
	return rest[0]
}
