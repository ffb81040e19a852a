package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// errPrinted means the command already told the user what went wrong.
var errPrinted = errors.New("already reported")

// exitCode ends the program with a given status (err printed if non-nil).
type exitCode struct {
	code int
	err  error
}

func (e exitCode) Error() string { return fmt.Sprintf("exit %d: %v", e.code, e.err) }

// globals are the flags every command takes, before or after the verb.
type globals struct {
	configPath string
	stdout     io.Writer
	stderr     io.Writer
}

func isFlag(s string) bool { return strings.HasPrefix(s, "-") && s != "-" }

// parseGlobals takes --config (anywhere on the line) out of args.
func parseGlobals(args []string) (*globals, []string, error) {
	g := &globals{configPath: config.DefaultFile, stdout: os.Stdout, stderr: os.Stderr}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--config" || a == "-config":
			if i+1 >= len(args) {
				return nil, nil, errors.New("--config needs a file: --config nanoclaw.config.jsonc")
			}
			g.configPath = args[i+1]
			i++
		case strings.HasPrefix(a, "--config="), strings.HasPrefix(a, "-config="):
			g.configPath = a[strings.Index(a, "=")+1:]
		case a == "--":
			rest = append(rest, args[i:]...)
			i = len(args)
		default:
			rest = append(rest, a)
		}
	}
	return g, rest, nil
}

// parseFlags parses fs from args with flags and positional arguments in
// any order, and checks the number of positional arguments.
func parseFlags(fs *flag.FlagSet, args []string, minPos, maxPos int, usage string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%v; usage: nanoclawd %s", err, usage)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < minPos || len(pos) > maxPos {
		return nil, fmt.Errorf("wrong number of arguments; usage: nanoclawd %s", usage)
	}
	return pos, nil
}

// loadConfig loads the config, printing each problem as FILE:LINE:COL.
func (g *globals) loadConfig() (*config.Config, error) {
	cfg, err := config.Load(g.configPath)
	var errs config.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Fprintln(g.stderr, e.Error())
		}
		fmt.Fprintf(g.stderr, "nanoclawd: %s has %d problem(s); fix them and run 'nanoclawd config check'\n", g.configPath, len(errs))
		return nil, errPrinted
	}
	return cfg, err
}

// openRegistry loads the config and opens the database.
func (g *globals) openRegistry() (*config.Config, *sql.DB, *groups.Registry, error) {
	cfg, err := g.loadConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	db, err := store.Open(cfg.DataDir)
	if err != nil {
		return nil, nil, nil, err
	}
	reg := groups.New(db, cfg.GroupsDir)
	reg.Assistant = cfg.AssistantName
	return cfg, db, reg, nil
}

// listGroups loads the config and returns it with every registered group.
func (g *globals) listGroups(ctx context.Context) (*config.Config, []groups.Group, error) {
	cfg, db, reg, err := g.openRegistry()
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	list, err := reg.List(ctx)
	return cfg, list, err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printUsage() {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Println("usage: nanoclawd [--config FILE] COMMAND [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Println("  nanoclawd " + commands[n].usage)
	}
}

// notifyDaemon tells a running daemon that the registry changed, so the
// change takes effect without a restart.
func notifyDaemon(cfg *config.Config) {
	_ = groups.NotifyChanged(cfg.DataDir)
}
