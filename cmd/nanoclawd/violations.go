package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
)

func init() {
	register("violations", "violations [--group FOLDER] [--since DURATION] [--json]   the audit trail of blocked actions", violations)
}

func violations(ctx context.Context, g *globals, args []string) error {
	const usage = "violations [--group FOLDER] [--since DURATION] [--json]"
	fs := flag.NewFlagSet("violations", flag.ContinueOnError)
	group := fs.String("group", "", "")
	since := fs.String("since", "", "")
	asJSON := fs.Bool("json", false, "")
	if _, err := parseFlags(fs, args, 0, 0, usage); err != nil {
		return err
	}
	var f alerts.Filter
	f.Group = *group
	if *since != "" {
		d, err := time.ParseDuration(*since)
		if err != nil || d <= 0 {
			return fmt.Errorf("--since %q is not a duration; write it like 30m, 24h or 168h", *since)
		}
		f.Since = d
	}
	_, db, _, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	list, err := alerts.List(ctx, db, f)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(g.stdout, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(g.stdout, "no violations recorded")
		return nil
	}
	return alerts.FormatTable(g.stdout, list)
}
