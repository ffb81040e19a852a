package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

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

// A command is one verb of the CLI (main.go lists them all). Its Run
// declares its flags, each with a help line, and parses args with
// g.parse before it does anything else; Usage is its synopsis, the one
// place it is written.
type command interface {
	Usage() string
	Run(ctx context.Context, g *globals, args []string) error
}

// globals are what every command gets: --config (before or after the
// verb), the verb's name as typed, and where to write.
type globals struct {
	configPath string
	verb       string
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

// flags is a new, empty flag set for the running verb.
func (g *globals) flags() *flag.FlagSet {
	fs := flag.NewFlagSet(g.verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse says what went wrong, in one line
	return fs
}

// parse parses args against fs, with flags and positional arguments in any
// order, and wants exactly n positional arguments. With -h or --help it
// prints c's help and returns flag.ErrHelp, which Main turns into success.
func (g *globals) parse(c command, fs *flag.FlagSet, args []string, n int) ([]string, error) {
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			g.verbHelp(c, fs)
			return nil, err
		}
		if err != nil {
			msg := strings.NewReplacer("flag provided but not defined: -", "unknown flag --",
				"flag needs an argument: -", "a value is missing after --").Replace(err.Error())
			return nil, fmt.Errorf("%s: %s; see 'nanoclawd %s --help'", g.verb, msg, g.verb)
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
	switch {
	case n < 0: // the verb checks how many it got
	case len(pos) > n:
		return nil, g.usageError(c, "unexpected argument %q", pos[n])
	case len(pos) < n:
		return nil, g.usageError(c, "an argument is missing")
	}
	return pos, nil
}

// usageError is a mistake on the command line of c, with its usage.
func (g *globals) usageError(c command, format string, a ...any) error {
	return fmt.Errorf("%s: %s; usage: nanoclawd %s", g.verb, fmt.Sprintf(format, a...), c.Usage())
}

// verbHelp prints c's synopsis, what it does and each of its flags.
func (g *globals) verbHelp(c command, fs *flag.FlagSet) {
	fmt.Fprintf(g.stdout, "usage: nanoclawd %s\n\n%s\n\nflags:\n", c.Usage(), summary(g.verb))
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 3, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		arg, help := flag.UnquoteUsage(f)
		if arg != "" {
			arg = " " + arg
		}
		if f.DefValue != "" && f.DefValue != "false" {
			help += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(tw, "  --%s%s\t%s\n", f.Name, arg, help)
	})
	fmt.Fprintf(tw, "  --config FILE\tthe config file, before or after the verb (default %s)\n", config.DefaultFile)
	tw.Flush()
}

// verbsOf is the verbs of a noun ("groups": list, add, ...).
func verbsOf(noun string) []string {
	var verbs []string
	for _, c := range commands {
		if v, ok := strings.CutPrefix(c.name, noun+" "); ok {
			verbs = append(verbs, v)
		}
	}
	return verbs
}

// summary is what the verb name does, in one line.
func summary(name string) string {
	for _, c := range commands {
		if c.name == name {
			return c.summary
		}
	}
	return ""
}

// help lists the commands whose name starts with prefix ("": all of them)
// with what each does.
func (g *globals) help(prefix string) {
	if prefix == "" {
		fmt.Fprint(g.stdout, "nanoclawd puts a Claude assistant into your WhatsApp and Telegram chats, with a sandbox policy per group.\n\n")
	}
	fmt.Fprintf(g.stdout, "usage: nanoclawd [--config FILE] %sCOMMAND [flags] [arguments]\n\ncommands:\n", prefix)
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 3, ' ', 0)
	for _, c := range commands {
		if strings.HasPrefix(c.name, prefix) {
			fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
		}
	}
	tw.Flush()
	fmt.Fprintf(g.stdout, "\nEvery command takes --config FILE (default %s), before or after the verb;\n"+
		"flags and arguments may come in any order. 'nanoclawd COMMAND --help' shows a command's flags.\n", config.DefaultFile)
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
func (g *globals) openRegistry() (*config.Config, *store.DB, *groups.Registry, error) {
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

// notifyDaemon tells a running daemon that the registry changed, so the
// change takes effect without a restart.
func notifyDaemon(cfg *config.Config) {
	_ = groups.NotifyChanged(cfg.DataDir)
}
