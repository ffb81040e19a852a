// Package summary is the daily word from the assistant (alerts.daily): at
// a local time each day, a short message to the main chat with each
// group's runs and failures, the spend, the violations, the last backup and
// how long WhatsApp has been connected.
package summary

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/backup"
	"github.com/nanoclawd/nanoclawd/internal/runner"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// Facts are what one summary says, gathered for the day before At.
type Facts struct {
	At         time.Time
	Runs       map[string]runner.RunCount // by group folder
	Violations map[string]int             // by group folder
	// Spend is the usage by group folder; nil when usage is not counted.
	Spend      map[string]usage.Total
	LastBackup *backup.Last
	// Link is the WhatsApp connection: Connected since Since, or down since
	// Since; Enabled false when WhatsApp is off.
	Link Link
}

// Link is one channel's connection at the time of the summary.
type Link struct {
	Enabled   bool
	Connected bool
	Since     time.Time
}

// Text renders f as the message to the main chat. It is a pure function
// of f, so tests compare it whole.
func Text(f Facts) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("[DAILY] nanoclawd, %s — the last 24 hours", f.At.Format("Mon 2 Jan 15:04"))
	folders := slices.Sorted(maps.Keys(f.Runs))
	if len(folders) == 0 {
		p("Runs: none")
	} else {
		p("Runs:")
	}
	for _, g := range folders {
		c := f.Runs[g]
		line := fmt.Sprintf("• %s: %d run%s", g, c.Runs, plural(c.Runs))
		if c.Failures > 0 {
			line += fmt.Sprintf(", %d failed", c.Failures)
		}
		p("%s", line)
	}
	if f.Spend == nil {
		p("Spend: not counted")
	} else {
		var total usage.Total
		var parts []string
		for _, g := range slices.Sorted(maps.Keys(f.Spend)) {
			t := f.Spend[g]
			total.Requests += t.Requests
			total.Priced += t.Priced
			total.CostUSD += t.CostUSD
			total.Unpriced = append(total.Unpriced, t.Unpriced...)
			parts = append(parts, g+" "+t.Cost())
		}
		p("Spend: %s (%s)", total.Cost(), cmp.Or(strings.Join(parts, ", "), "nothing"))
	}
	if len(f.Violations) == 0 {
		p("Violations: none")
	} else {
		var parts []string
		for _, g := range slices.Sorted(maps.Keys(f.Violations)) {
			parts = append(parts, fmt.Sprintf("%s %d", g, f.Violations[g]))
		}
		p("Violations: %s ('nanoclawd violations --since 24h' lists them)", strings.Join(parts, ", "))
	}
	if f.LastBackup == nil {
		p("Last backup: none yet (set backup.every, or run 'nanoclawd backup')")
	} else {
		p("Last backup: %s", f.LastBackup)
	}
	switch {
	case !f.Link.Enabled:
		p("WhatsApp: not enabled")
	case f.Link.Connected:
		p("WhatsApp: connected for %s", span(f.At.Sub(f.Link.Since)))
	case f.Link.Since.IsZero():
		p("WhatsApp: not connected")
	default:
		p("WhatsApp: NOT connected, for %s", span(f.At.Sub(f.Link.Since)))
	}
	return strings.TrimRight(b.String(), "\n")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// span is d as "3d 4h", "5h 12m" or "7m".
func span(d time.Duration) string {
	d = d.Round(time.Minute)
	days, hours, mins := int(d.Hours())/24, int(d.Hours())%24, int(d.Minutes())%60
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, hours)
	case hours > 0:
		return fmt.Sprintf("%dh %dm", hours, mins)
	}
	return fmt.Sprintf("%dm", mins)
}

// Next is the first time after now that the clock in loc shows hour:minute.
// Across a DST change it is the next such wall-clock time (time.Date
// normalises a time that does not exist that day).
func Next(now time.Time, hour, minute int, loc *time.Location) time.Time {
	now = now.In(loc)
	t := time.Date(now.Year(), now.Month(), now.Day(), hour, minute, 0, 0, loc)
	if !t.After(now) {
		t = time.Date(now.Year(), now.Month(), now.Day()+1, hour, minute, 0, 0, loc)
	}
	return t
}
