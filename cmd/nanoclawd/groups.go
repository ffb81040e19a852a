package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/nanoclaw"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// groupsResetSession is 'nanoclawd groups reset-session'.
type groupsResetSession struct{}

func (groupsResetSession) Usage() string { return "groups reset-session FOLDER" }

func (c groupsResetSession) Run(ctx context.Context, g *globals, args []string) error {
	pos, err := g.parse(c, g.flags(), args, 1)
	if err != nil {
		return err
	}
	_, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := reg.ByFolder(ctx, pos[0]); err != nil {
		return fmt.Errorf("%w: %s (see 'nanoclawd groups list')", err, pos[0])
	}
	had, err := messages.New(db).ResetSession(ctx, pos[0])
	if err != nil {
		return err
	}
	if !had {
		fmt.Fprintf(g.stdout, "%s has no saved session; its next run starts fresh anyway\n", pos[0])
		return nil
	}
	fmt.Fprintf(g.stdout, "the next run of %s starts a fresh agent session\n", pos[0])
	return nil
}

// groupsList is 'nanoclawd groups list'.
type groupsList struct{}

func (groupsList) Usage() string { return "groups list [--json]" }

func (c groupsList) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	asJSON := fs.Bool("json", false, "print JSON: an array of {jid, name, folder, isMain, trigger, requiresTrigger, security, ...}")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	_, list, err := g.listGroups(ctx)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(g.stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(g.stdout, "no groups registered; add one with 'nanoclawd groups add --jid JID --name NAME --folder FOLDER'")
		return nil
	}
	tw := tabwriter.NewWriter(g.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FOLDER\tNAME\tJID\tTRIGGER\tMAIN\tOVERRIDE")
	for _, gr := range list {
		trigger := gr.Trigger
		if !gr.RequiresTrigger {
			trigger = "(none needed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", gr.Folder, gr.Name, gr.JID, trigger, yesNo(gr.IsMain), yesNo(gr.Security != nil))
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// groupsAdd is 'nanoclawd groups add'.
type groupsAdd struct{}

func (groupsAdd) Usage() string {
	return "groups add --jid JID --name NAME --folder FOLDER [--main] [--trigger TEXT] [--no-trigger]"
}

func (c groupsAdd) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	jid := fs.String("jid", "", "the chat, by its `JID`: a WhatsApp group (see 'nanoclawd whatsapp groups') or local:NAME on the local channel (required)")
	name := fs.String("name", "", "the group's display `NAME`")
	folder := fs.String("folder", "", "the group's `FOLDER` under groupsDir: letters, digits, _ and -, up to 64 (required)")
	isMain := fs.Bool("main", false, "make it the main group: the owner's admin chat, unsandboxed and needing no trigger (at most one)")
	trigger := fs.String("trigger", "", "the `TEXT` a message starts with to reach the agent (default @ and the assistantName)")
	noTrigger := fs.Bool("no-trigger", false, "every message reaches the agent, without a trigger")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	for flagName, v := range map[string]string{"--jid": *jid, "--folder": *folder} {
		if strings.TrimSpace(v) == "" {
			return g.usageError(c, "%s is required", flagName)
		}
	}
	cfg, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	gr := groups.Group{JID: *jid, Name: *name, Folder: *folder, Trigger: *trigger, IsMain: *isMain,
		RequiresTrigger: !*noTrigger && !*isMain}
	if gr.Trigger == "" {
		gr.Trigger = cfg.DefaultTrigger()
	}
	if err := reg.Add(ctx, gr); err != nil {
		return err
	}
	notifyDaemon(cfg)
	fmt.Fprintf(g.stdout, "registered %s (%s) in %s\n", gr.Folder, gr.JID, reg.Dir(gr.Folder))
	return nil
}

// groupsRemove is 'nanoclawd groups remove'.
type groupsRemove struct{}

func (groupsRemove) Usage() string { return "groups remove FOLDER" }

func (c groupsRemove) Run(ctx context.Context, g *globals, args []string) error {
	pos, err := g.parse(c, g.flags(), args, 1)
	if err != nil {
		return err
	}
	cfg, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	if err := reg.Remove(ctx, pos[0]); err != nil {
		return err
	}
	notifyDaemon(cfg)
	fmt.Fprintf(g.stdout, "removed %s (its folder %s is kept)\n", pos[0], reg.Dir(pos[0]))
	return nil
}

// groupsSetSecurity is 'nanoclawd groups set-security'.
type groupsSetSecurity struct{}

func (groupsSetSecurity) Usage() string {
	return "groups set-security FOLDER --file OVERRIDE.json | --clear"
}

func (c groupsSetSecurity) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	file := fs.String("file", "", "set the override from `OVERRIDE.json`: an object with any of "+overrideKeys)
	clear := fs.Bool("clear", false, "remove the override: the group follows hostSecurity again")
	pos, err := g.parse(c, fs, args, 1)
	if err != nil {
		return err
	}
	if (*file == "") == !*clear {
		return g.usageError(c, "give exactly one of --file OVERRIDE.json or --clear")
	}
	var override *security.Policy
	if *file != "" {
		cfg, err := g.loadConfig()
		if err != nil {
			return err
		}
		if override, err = readOverride(*file, cfg); err != nil {
			var errs config.Errors
			if errors.As(err, &errs) {
				for _, e := range errs {
					fmt.Fprintln(g.stderr, e.Error())
				}
				fmt.Fprintf(g.stderr, "nanoclawd: %s is not a valid override (keys: %s); nothing changed\n", *file, overrideKeys)
				return errPrinted
			}
			return err
		}
	}
	cfg, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	gr, err := reg.ByFolder(ctx, pos[0])
	if err != nil {
		return fmt.Errorf("%w: %s (see 'nanoclawd groups list')", err, pos[0])
	}
	if err := reg.SetSecurity(ctx, gr.Folder, override); err != nil {
		return err
	}
	notifyDaemon(cfg)
	switch {
	case override == nil:
		fmt.Fprintf(g.stdout, "cleared the security override of %s\n", gr.Folder)
	case gr.IsMain && (override.Budget != nil || override.Model != "" || override.Provider != ""):
		fmt.Fprintf(g.stdout, "set the budget, model and provider the override names for the main group %s; the rest of an override has no effect on the main group, which is exempt\n", gr.Folder)
	case gr.IsMain:
		fmt.Fprintf(g.stdout, "stored the override of %s, but %s is the main group, which is exempt: it has no effect while the group is main\n", gr.Folder, gr.Folder)
	default:
		fmt.Fprintf(g.stdout, "set the security override of %s; see the result with 'nanoclawd security show %s'\n", gr.Folder, gr.Folder)
	}
	return nil
}

// overrideKeys are the keys of a per-group override: the JSON names of
// security.Policy's fields, so a key added there is named here too.
var overrideKeys = func() string {
	t := reflect.TypeFor[security.Policy]()
	var keys []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return strings.Join(keys, ", ")
}()

// readOverride reads and validates a per-group override file, with the
// same strictness and FILE:LINE:COL errors as the config; its env names
// must be in agent.env of cfg.
func readOverride(path string, cfg *config.Config) (*security.Policy, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read override: %w", err)
	}
	var p security.Policy
	pos, err := config.DecodeStrict(path, src, &p, false)
	var errs config.Errors
	if err != nil && (!errors.As(err, &errs) || pos == nil) {
		return nil, err
	}
	probs := append(config.ValidatePolicy(&p, ""), config.ValidateOverrideEnv(&p, cfg.Agent.Env, cfg.File)...)
	for _, pr := range append(probs, config.ValidateOverrideModel(&p, cfg)...) {
		e := &config.Error{File: path, Line: 1, Col: 1, Key: pr.Key, Msg: pr.Msg}
		if off, ok := pos[pr.Key]; ok {
			e.Line, e.Col = config.LineCol(src, off)
		}
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return nil, errs.Sorted()
	}
	return &p, nil
}

// groupsImport is 'nanoclawd groups import'.
type groupsImport struct{}

func (groupsImport) Usage() string { return "groups import FILE [--dry-run]" }

func (c groupsImport) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	dryRun := fs.Bool("dry-run", false, "say what would be imported, and change nothing")
	pos, err := g.parse(c, fs, args, 1)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(pos[0])
	if err != nil {
		return fmt.Errorf("read %s: %w", pos[0], err)
	}
	var in *nanoclaw.Install
	if nanoclaw.IsSQLite(data) {
		in, err = nanoclaw.Read(ctx, pos[0])
	} else {
		in, err = nanoclaw.ReadJSON(data)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	cfg, db, reg, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	sched := scheduler.New(db, cfg.Location(), nil, nil, zerolog.Nop())
	t := nanoclaw.Target{DB: db, Registry: reg, Scheduler: sched, DefaultTrigger: cfg.DefaultTrigger()}
	if err := nanoclaw.Apply(ctx, in, t, *dryRun, g.stdout); err != nil {
		return fmt.Errorf("%s: %w", pos[0], err)
	}
	if *dryRun {
		fmt.Fprintln(g.stdout, "dry run: nothing was changed; run it again without --dry-run to import")
		return nil
	}
	notifyDaemon(cfg)
	return nil
}
