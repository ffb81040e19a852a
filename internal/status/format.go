package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/fit"
)

// Format writes r as text for a person: one section per part, a line
// saying "none" rather than an empty table, no line wider than fit.Width
// (what a column cannot hold is cut; --json has all of it).
func Format(w io.Writer, r Report) error {
	var t text
	p := t.line
	now := r.Time
	p("nanoclawd is running: PID %d, up %s (since %s)", r.PID, ago(now, r.Started), clock(r.Started))
	p("config: %s", r.ConfigFile)
	p("database: %.1f MiB", float64(r.DatabaseBytes)/(1<<20))

	p("\nChannels")
	if len(r.Channels) == 0 {
		p("  none enabled: set channels.whatsapp.enabled, channels.telegram.enabled or channels.local.enabled")
	}
	var rows [][]string
	for _, c := range r.Channels {
		state := c.State
		if c.RetryAt != nil {
			state = fmt.Sprintf("next try in %s: %s", until(now, *c.RetryAt), state)
		}
		rows = append(rows, []string{c.Name, state})
	}
	t.wrapped(rows...) // a channel's state says what to do: all of it

	consoleLine(p, r.Console)

	p("\nAgents: %d running, %d queued, %d standby, at most %d at once", r.Agents.Running, r.Agents.Queued, r.Agents.Standby, r.Agents.MaxConcurrent)
	if len(r.Groups) == 0 {
		p("  no groups registered: run 'nanoclawd setup'")
	}
	rows = [][]string{{"GROUP", "AGENT", "CALLED BY", "LAST RUN"}}
	for _, g := range r.Groups {
		name := g.Folder
		if g.IsMain {
			name += " (main)"
		}
		rows = append(rows, []string{name, agentText(now, g), triggerText(g), lastRunText(now, g.LastRun)})
	}
	if len(r.Groups) > 0 {
		t.table(rows...)
	}
	if len(r.Unregistered) > 0 {
		var chats []string
		for _, u := range r.Unregistered {
			chats = append(chats, fmt.Sprintf("%s ×%d", u.ChatJID, u.Messages))
		}
		p("  %s", fit.Cut("messages from unregistered chats: "+strings.Join(chats, ", "), fit.Width-2))
		p("  (nothing answers them: 'nanoclawd groups add --jid JID --name NAME --folder FOLDER')")
	}

	if len(r.Outbox) == 0 {
		p("\nOutbox: nothing waiting to be sent")
	} else {
		p("\nOutbox: waiting to be sent")
		rows = [][]string{{"CHAT", "WAITING", "OLDEST", "ATTEMPTS", "LAST ERROR"}}
		for _, o := range r.Outbox {
			chat := o.ChatJID
			if chat == "" {
				chat = "(alerts: no main group)"
			}
			e := o.LastError
			if o.RetryAt != nil {
				e = fmt.Sprintf("retry in %s: %s", until(now, *o.RetryAt), e)
			}
			rows = append(rows, []string{chat, fmt.Sprint(o.Count), ago(now, o.Oldest) + " ago", fmt.Sprint(o.Attempts), e})
		}
		t.table(rows...)
	}

	if len(r.NextTasks) == 0 {
		p("\nScheduled tasks: none due")
	} else {
		p("\nScheduled tasks due next")
		rows = [][]string{{"WHEN", "GROUP", "ID", "SCHEDULE", "PROMPT"}}
		for _, t := range r.NextTasks {
			rows = append(rows, []string{"in " + until(now, t.NextRun), t.Group, t.ID, fit.Cut(t.Schedule, 24), t.Prompt})
		}
		t.table(rows...)
	}

	if len(r.Violations24h) == 0 {
		p("\nViolations in the last 24 h: none")
	} else {
		p("\nViolations in the last 24 h ('nanoclawd violations --since 24h' lists them)")
		rows = [][]string{{"GROUP", "KIND", "COUNT"}}
		for _, v := range r.Violations24h {
			rows = append(rows, []string{v.Group, v.Kind, fmt.Sprint(v.Count)})
		}
		t.table(rows...)
	}

	switch l := r.LastBackup; {
	case l == nil:
		p("\nBackups: none made yet ('nanoclawd backup', or backup.every in the config)")
	case !l.OK:
		p("\nBackups: %s", fit.Cut(fmt.Sprintf("last backup: FAILED at %s: %s", l.Time.Local().Format("2006-01-02 15:04"), l.Error), fit.Width-9))
	default:
		v := ""
		if l.Verified {
			v = ", verified"
		}
		p("\nBackups: last backup: ok at %s (%.1f MB%s)", l.Time.Local().Format("2006-01-02 15:04"), float64(l.Bytes)/1e6, v)
		p("  %s", fit.Cut(l.Archive, fit.Width-2))
	}
	if r.NextBackup != nil {
		p("  next scheduled at %s (in %s)", clock(*r.NextBackup), until(now, *r.NextBackup))
	}
	usageSection(&t, r)

	p("\nConfig in force (all of it: nanoclawd status --json)")
	var cfg struct {
		AssistantName string
		DataDir       string
		GroupsDir     string
		Agent         struct {
			Command       []string
			MaxConcurrent int
		}
	}
	json.Unmarshal(r.Config, &cfg)
	t.table([]string{"assistantName", cfg.AssistantName}, []string{"dataDir", cfg.DataDir},
		[]string{"groupsDir", cfg.GroupsDir}, []string{"agent.command", strings.Join(cfg.Agent.Command, " ")})
	if len(r.PendingRestart) > 0 {
		p("  %s", fit.Cut("changed in the file, applied after a restart: "+strings.Join(r.PendingRestart, ", "), fit.Width-2))
	}
	_, err := io.WriteString(w, t.String())
	return err
}

// text is the report as it is written.
type text struct{ strings.Builder }

// line writes one line.
func (t *text) line(format string, args ...any) { fmt.Fprintf(t, format+"\n", args...) }

// table writes rows in columns two spaces apart, indented by two. Every
// column but the last is as wide as its widest cell; the last is cut to
// what is left of fit.Width.
func (t *text) table(rows ...[]string) { t.columns(false, rows) }

// wrapped is table with the last column wrapped onto more lines, not cut.
func (t *text) wrapped(rows ...[]string) { t.columns(true, rows) }

func (t *text) columns(wrap bool, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0])-1)
	for _, r := range rows {
		for i := range widths {
			widths[i] = max(widths[i], fit.Len(r[i]))
		}
	}
	for _, r := range rows {
		line := "  "
		for i, w := range widths {
			line += r[i] + strings.Repeat(" ", w-fit.Len(r[i])+2)
		}
		if last := r[len(r)-1]; wrap {
			line = fit.Wrap(line, last, strings.Repeat(" ", fit.Len(line)))
		} else {
			line += fit.Cut(last, fit.Width-fit.Len(line))
		}
		t.WriteString(strings.TrimRight(line, " ") + "\n")
	}
}

func agentText(now time.Time, g Group) string {
	var s string
	switch g.Agent {
	case "running":
		s = "running " + ago(now, *g.RunningSince)
		if g.RunningTask != "" {
			s += " (task)"
		}
	case "standby":
		s = "standby"
		if g.StandbySince != nil {
			s += " for " + ago(now, *g.StandbySince)
		}
	case "retrying":
		s = fmt.Sprintf("retrying (%d failed)", g.Failures)
	case "paused":
		s = "paused (/resume it)"
	default:
		s = g.Agent
	}
	if g.QueuedTasks > 0 {
		s += fmt.Sprintf(", +%d task(s)", g.QueuedTasks)
	}
	return s
}

// triggerText says which messages call a group's agent: every one, or
// those that start with its trigger.
func triggerText(g Group) string {
	if g.Trigger == "" {
		return "every message"
	}
	return g.Trigger + " …"
}

// lastRunText is a group's last run in a few words; a failure's first
// words follow, cut to the column.
func lastRunText(now time.Time, r *LastRun) string {
	switch {
	case r == nil:
		return "none yet"
	case r.Stopped:
		return fmt.Sprintf("stopped, %s ago", ago(now, r.Finished)) // by nanoclawd's shutdown
	case r.OK:
		return fmt.Sprintf("ok, %s ago", ago(now, r.Finished))
	}
	return fmt.Sprintf("failed %s ago: %s", ago(now, r.Finished), r.Error)
}

func clock(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") }

func ago(now, t time.Time) string { return short(now.Sub(t)) }

func until(now, t time.Time) string { return short(t.Sub(now)) }

// short rounds d to what a person reads: tenths of a second below 10 s.
func short(d time.Duration) string {
	d = max(d, 0)
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
