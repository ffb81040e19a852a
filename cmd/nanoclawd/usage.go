package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// usageCommand is 'nanoclawd usage'.
type usageCommand struct{}

func (usageCommand) Usage() string {
	return "usage [--group FOLDER] [--since DURATION] [--by model] [--json]"
}

func (c usageCommand) Run(ctx context.Context, g *globals, args []string) error {
	fs := g.flags()
	group := fs.String("group", "", "only the group in `FOLDER`")
	since := fs.String("since", "", "the last `DURATION` (30m, 24h, 7d) instead of today (since midnight, local time)")
	asJSON := fs.Bool("json", false, "print an array, one object per group: group, requests, inputTokens, outputTokens, cacheWriteTokens, cacheReadTokens, costUSD")
	by := fs.String("by", "", "split the rows by `WHAT`: \"model\" gives one row per group, provider and model (as configured), with provider and model in the JSON")
	if _, err := g.parse(c, fs, args, 0); err != nil {
		return err
	}
	if *by != "" && *by != "model" {
		return g.usageError(c, "--by takes only \"model\"")
	}
	cfg, db, _, err := g.openRegistry()
	if err != nil {
		return err
	}
	defer db.Close()
	now := time.Now()
	from := usage.Today(now, cfg.Location())
	if *since != "" {
		d, err := parseSpan(*since)
		if err != nil {
			return err
		}
		from = now.Add(-d)
	}
	if *by == "model" {
		return byModel(ctx, g, usage.NewStore(db), from, now, *group, *asJSON, cfg.Location())
	}
	totals, err := usage.NewStore(db).Totals(ctx, from, now.Add(time.Second), *group)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(g.stdout, totals)
	}
	if len(totals) == 0 {
		fmt.Fprintf(g.stdout, "no model requests since %s\n", from.In(cfg.Location()).Format("2006-01-02 15:04"))
		return nil
	}
	fmt.Fprintf(g.stdout, "model usage since %s (USD at usage.prices)\n", from.In(cfg.Location()).Format("2006-01-02 15:04"))
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tREQUESTS\tINPUT\tOUTPUT\tCACHE WRITE\tCACHE READ\tCOST")
	for _, t := range totals {
		cost := "unpriced " + strings.Join(t.Unpriced, ", ")
		if t.CostKnown() {
			cost = fmt.Sprintf("$%.4f", t.CostUSD)
			if len(t.Unpriced) > 0 {
				cost += " + unpriced " + strings.Join(t.Unpriced, ", ")
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Group, t.Requests, t.Input, t.Output, t.CacheWrite, t.CacheRead, cost)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range totals {
		if len(t.Unpriced) > 0 {
			fmt.Fprintf(g.stdout, "a model without a price is counted in tokens only: add it to usage.prices in %s\n", cfg.File)
			break
		}
	}
	return nil
}

// parseSpan reads a duration as Go writes it, or a whole number of days
// ("7d").
func parseSpan(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.Atoi(n); err == nil && days > 0 {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--since %q is not a duration; write it like 30m, 24h or 7d", s)
	}
	return d, nil
}

// byModel prints the usage per group, provider and model.
func byModel(ctx context.Context, g *globals, s *usage.Store, from, now time.Time, group string, asJSON bool, loc *time.Location) error {
	rows, err := s.TotalsByModel(ctx, from, now.Add(time.Second), group)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(g.stdout, rows)
	}
	if len(rows) == 0 {
		fmt.Fprintf(g.stdout, "no model requests since %s\n", from.In(loc).Format("2006-01-02 15:04"))
		return nil
	}
	fmt.Fprintf(g.stdout, "model usage since %s by provider and model (USD at usage.prices)\n", from.In(loc).Format("2006-01-02 15:04"))
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tPROVIDER\tMODEL\tREQUESTS\tINPUT\tOUTPUT\tCACHE WRITE\tCACHE READ\tCOST")
	for _, t := range rows {
		cost := fmt.Sprintf("$%.4f", t.CostUSD)
		if !t.Priced {
			cost = "unpriced"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", t.Group, t.Provider, t.Model, t.Requests, t.Input, t.Output, t.CacheWrite, t.CacheRead, cost)
	}
	return tw.Flush()
}
