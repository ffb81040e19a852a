package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Format writes r as text for a person: one section per part, a line
// saying "none" rather than an empty table.
func Format(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	now := r.Time
	p("nanoclawd is running: PID %d, up %s (since %s), config %s", r.PID, ago(now, r.Started), clock(r.Started), r.ConfigFile)
	p("database: %.1f MiB", float64(r.DatabaseBytes)/(1<<20))

	p("\nChannels")
	if len(r.Channels) == 0 {
		p("  none enabled: set channels.whatsapp.enabled, channels.telegram.enabled or channels.local.enabled")
	}
	for _, c := range r.Channels {
		if c.RetryAt != nil {
			p("  %s\t%s (next try in %s)", c.Name, c.State, until(now, *c.RetryAt))
		} else {
			p("  %s\t%s", c.Name, c.State)
		}
	}

	consoleLine(p, r.Console)

	p("\nAgents: %d running, %d queued, %d standby, at most %d at once", r.Agents.Running, r.Agents.Queued, r.Agents.Standby, r.Agents.MaxConcurrent)
	if len(r.Groups) == 0 {
		p("  no groups registered: run 'nanoclawd setup'")
	} else {
		p("  GROUP\tAGENT\tLAST RUN\tCALLED BY")
	}
	for _, g := range r.Groups {
		name := g.Folder
		if g.IsMain {
			name += " (main)"
		}
		p("  %s\t%s\t%s\t%s", name, agentText(now, g), lastRunText(now, g.LastRun), triggerText(g))
	}
	if len(r.Unregistered) > 0 {
		var chats []string
		for _, u := range r.Unregistered {
			chats = append(chats, fmt.Sprintf("%s ×%d", u.ChatJID, u.Messages))
		}
		p("  messages from unregistered chats: %s (nothing answers them; register one with 'nanoclawd groups add --jid JID --name NAME --folder FOLDER')",
			strings.Join(chats, ", "))
	}

	if len(r.Outbox) == 0 {
		p("\nOutbox: nothing waiting to be sent")
	} else {
		p("\nOutbox: waiting to be sent")
		p("  CHAT\tWAITING\tOLDEST\tATTEMPTS\tLAST ERROR")
	}
	for _, b := range r.Outbox {
		chat := b.ChatJID
		if chat == "" {
			chat = "(alerts for a main group that is not registered)"
		}
		e := b.LastError
		if b.RetryAt != nil {
			e = fmt.Sprintf("retry in %s: %s", until(now, *b.RetryAt), e)
		}
		p("  %s\t%d\t%s ago\t%d\t%s", chat, b.Count, ago(now, b.Oldest), b.Attempts, e)
	}

	if len(r.NextTasks) == 0 {
		p("\nScheduled tasks: none due")
	} else {
		p("\nScheduled tasks due next")
		p("  WHEN\tGROUP\tID\tSCHEDULE\tPROMPT")
	}
	for _, t := range r.NextTasks {
		p("  %s (in %s)\t%s\t%s\t%s\t%s", clock(t.NextRun), until(now, t.NextRun), t.Group, t.ID, t.Schedule, cut(t.Prompt, 40))
	}

	if len(r.Violations24h) == 0 {
		p("\nViolations in the last 24 h: none")
	} else {
		p("\nViolations in the last 24 h ('nanoclawd violations --since 24h' lists them)")
		p("  GROUP\tKIND\tCOUNT")
	}
	for _, v := range r.Violations24h {
		p("  %s\t%s\t%d", v.Group, v.Kind, v.Count)
	}

	switch {
	case r.LastBackup != nil:
		p("\nBackups: last backup: %s", r.LastBackup)
	default:
		p("\nBackups: none made yet ('nanoclawd backup', or backup.every in the config)")
	}
	if r.NextBackup != nil {
		p("  next scheduled at %s (in %s)", clock(*r.NextBackup), until(now, *r.NextBackup))
	}
	usageSection(p, r)

	p("\nConfig in force")
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
	p("  assistantName\t%s", cfg.AssistantName)
	p("  dataDir\t%s", cfg.DataDir)
	p("  groupsDir\t%s", cfg.GroupsDir)
	p("  agent.command\t%s", strings.Join(cfg.Agent.Command, " "))
	p("  (all of it: nanoclawd status --json)")
	if len(r.PendingRestart) > 0 {
		p("  pending restart: %s changed in the file and apply only after a restart", strings.Join(r.PendingRestart, ", "))
	}
	return tw.Flush()
}

func agentText(now time.Time, g Group) string {
	var s string
	switch g.Agent {
	case "running":
		s = "running for " + ago(now, *g.RunningSince)
		if g.RunningTask != "" {
			s += " (task " + g.RunningTask + ")"
		}
	case "standby":
		s = "standby"
		if g.StandbySince != nil {
			s += " for " + ago(now, *g.StandbySince)
		}
	case "retrying":
		s = fmt.Sprintf("retrying after %d failed run(s)", g.Failures)
	case "paused":
		s = "paused by the owner (/resume " + g.Folder + " in the main chat)"
	default:
		s = g.Agent
	}
	if g.QueuedTasks > 0 {
		s += fmt.Sprintf(", %d task(s) waiting", g.QueuedTasks)
	}
	return s
}

// triggerText says which messages call a group's agent.
func triggerText(g Group) string {
	if g.Trigger == "" {
		return "every message"
	}
	return "messages starting with " + g.Trigger
}

func lastRunText(now time.Time, r *LastRun) string {
	if r == nil {
		return "none yet"
	}
	if r.OK {
		return fmt.Sprintf("ok, %s ago", ago(now, r.Finished))
	}
	return fmt.Sprintf("failed %s ago: %s", ago(now, r.Finished), cut(r.Error, 160))
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

func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
