package main

import (
	"context"
	"fmt"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
)

// violations is 'nanoclawd violations'.
type violations struct{}

func (violations) Usage() string { return "violations [--group FOLDER] [--since DURATION] [--json]" }

func (c violations) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	group := fs.String("group", "", "only the violations of the group in `FOLDER`")
	since := fs.String("since", "", "only those of the last `DURATION`, such as 30m, 24h or 168h")
	asJSON := fs.Bool("json", false, "print them as JSON: an array of {time, group, kind, tool, target, detail, action}")
	if _, err := g.parse(c, fs, args, 0); err != nil {
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
