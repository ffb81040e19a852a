package alerts

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nanoclawd/nanoclawd/internal/approvals"
	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Length caps, in runes, of agent-supplied fields as stored in the audit
// trail and as shown in an alert.
const (
	maxGroup       = 64
	maxTool        = 64
	maxKind        = 32
	maxStoredField = 1024
	maxStoredDet   = 4096
	maxAlertTarget = 200
	maxAlertDetail = 300
)

// clean makes agent-supplied text safe to store and to show: invalid UTF-8
// becomes U+FFFD; control characters (newlines included), bidi
// overrides/isolates, zero-width and other format characters, and line or
// paragraph separators are written as visible escapes (\n, \u202e), so the
// text stays one line and reads in the order it was written; it is cut to
// max runes with "…".
func clean(s string, max int) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if n >= max {
			b.WriteString("…")
			break
		}
		n++
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(unicode.ReplacementChar)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Co, unicode.Cs):
			if r <= 0xFF {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// alertMarker matches attempts to write the alert marker inside agent text,
// in any case and with any spacing.
var alertMarker = regexp.MustCompile(`(?i)\[\s*sandbox\s+alert\s*\]`)

// defuse makes cleaned text harmless inside an alert: an "@" that could
// start a mention becomes the full-width "＠", and a forged
// "[SANDBOX ALERT]" loses its brackets.
func defuse(s string) string {
	s = alertMarker.ReplaceAllStringFunc(s, func(m string) string {
		return "(" + m[1:len(m)-1] + ")"
	})
	return defuseMentions(s)
}

// defuseMentions replaces each "@" that starts a word, as a mention does;
// an "@" inside a word (mail addresses, chat JIDs) stays readable.
func defuseMentions(s string) string {
	var b strings.Builder
	prev := ' '
	for _, r := range s {
		if r == '@' && !(unicode.IsLetter(prev) || unicode.IsDigit(prev) || strings.ContainsRune("_.+-", prev)) {
			b.WriteRune('＠')
		} else {
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

// show prepares a stored (already cleaned) field for an alert.
func show(s string, max int) string {
	return defuse(clean(s, max))
}

// sanitize cleans every agent-supplied field of v for storage.
func sanitize(v security.Violation) security.Violation {
	v.Group = clean(v.Group, maxGroup)
	v.Kind = security.Kind(clean(string(v.Kind), maxKind))
	v.Tool = clean(v.Tool, maxTool)
	v.Target = clean(v.Target, maxStoredField)
	v.Detail = clean(v.Detail, maxStoredDet)
	switch v.Action {
	case "reported", approvals.ActionAllowed, approvals.ActionUndone, approvals.ActionPaused, approvals.ActionResumed, approvals.ActionModel,
		approvals.ActionSessionReset, approvals.ActionTaskChanged:
	default:
		v.Action = "blocked"
	}
	v.Rule = clean(v.Rule, maxStoredField)
	return v
}

// quote shows agent-supplied text in an alert: cleaned, capped, defused
// and in quotation marks, so it reads as a value, never as the daemon's
// own words.
func quote(s string, max int) string { return "“" + show(s, max) + "”" }

// headline is the first line of an alert after the marker and count:
// which group, which tool, what was blocked, and the target.
func headline(v security.Violation) string {
	group, tool, target := show(v.Group, maxGroup), show(v.Tool, maxTool), quote(v.Target, maxAlertTarget)
	var what string
	switch v.Kind {
	case security.KindNetwork:
		what = "network access to"
	case security.KindTool:
		what = "use on"
	case security.KindPermission:
		what = "permission for"
	case security.KindIPC:
		return fmt.Sprintf("group %q tried to act as another group (%s): %s", group, tool, target)
	case security.KindLimit:
		return fmt.Sprintf("group %q: the run went over its %s limit and was stopped", group, show(v.Target, maxKind))
	case security.KindFilesystem:
		if v.Rule == groupfs.Rule {
			return fmt.Sprintf("group %q put a link at %s, where nanoclawd keeps its own directory or file; nanoclawd removed it without following it",
				group, target)
		}
		what = "file access to"
	default:
		what = show(string(v.Kind), maxKind) + " access to"
	}
	return fmt.Sprintf("group %q: %s was denied %s %s", group, tool, what, target)
}

// alertText is the message for a violation that gets an alert of its own.
// It starts by saying who stands behind it: "blocked" when nanoclawd (its
// sandbox, gateway, IPC checks or limits) refused the action itself, "the
// agent reports" when only the agent says so, which it can make up.
func alertText(v security.Violation) string {
	var b strings.Builder
	b.WriteString("[SANDBOX ALERT] ")
	if v.Action == "reported" {
		b.WriteString("the agent reports (not verified by nanoclawd): ")
	} else {
		b.WriteString("blocked: ")
	}
	b.WriteString(headline(v))
	if v.Detail != "" {
		b.WriteString("\nDetail: ")
		b.WriteString(quote(v.Detail, maxAlertDetail))
	}
	b.WriteString("\n")
	b.WriteString(fixHint(v))
	return b.String()
}

// foldedCount is how often one (kind, tool, target) was folded.
type foldedCount struct {
	kind, tool, target string
	n                  int
}

// maxSummaryTargets is how many targets a summary names per kind and tool.
const maxSummaryTargets = 3

// summaryText sums up what a group's window folded: counts by kind and
// tool, each with its most frequent targets, so no kind or tool hides
// behind another's name.
func summaryText(group string, folded []foldedCount, cooldown time.Duration) string {
	type line struct {
		kind, tool string
		n          int
		targets    []foldedCount
	}
	var lines []*line
	total := 0
	for _, f := range folded {
		total += f.n
		if len(lines) == 0 || lines[len(lines)-1].kind != f.kind || lines[len(lines)-1].tool != f.tool {
			lines = append(lines, &line{kind: f.kind, tool: f.tool})
		}
		l := lines[len(lines)-1]
		l.n += f.n
		l.targets = append(l.targets, f)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[SANDBOX ALERT] +%d more (within %s): group %q: %d more violations, blocked by nanoclawd or reported by the agent:", total, cooldown, show(group, maxGroup), total)
	for _, l := range lines {
		fmt.Fprintf(&b, "\n- %s by %s ×%d:", show(l.kind, maxKind), show(l.tool, maxTool), l.n)
		sort.SliceStable(l.targets, func(i, j int) bool { return l.targets[i].n > l.targets[j].n })
		for i, t := range l.targets {
			if i == maxSummaryTargets {
				fmt.Fprintf(&b, " and %d more", len(l.targets)-i)
				break
			}
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, " %s ×%d", quote(t.target, maxAlertTarget/2), t.n)
		}
	}
	// The window folds nanoclawd's own refusals with what only the agent
	// reports; the list says which is which.
	fmt.Fprintf(&b, "\nEach one, and whether nanoclawd blocked it or only the agent reports it: `nanoclawd violations --group %s --since %s`.",
		show(group, maxGroup), cooldown)
	return b.String()
}

// fixHint says which rule refused the action and which key to change to
// allow it. It names keys, never values the agent supplied: a target chosen
// by an attacker must not turn into a suggestion to allow it.
func fixHint(v security.Violation) string {
	folder := show(v.Group, maxGroup)
	setSec := fmt.Sprintf("`nanoclawd groups set-security %s --file OVERRIDE.json`", folder)
	showCmd := fmt.Sprintf("`nanoclawd security show %s`", folder)
	rule := v.Rule
	if rule == "" {
		rule = defaultRule(v)
	}
	if v.Action == "reported" {
		hint := "nanoclawd did not see this refusal itself: the agent says so, and an agent can make that up. " +
			"Change nothing unless the group really needs this; `nanoclawd violations --group " + folder + "` lists what nanoclawd blocked itself."
		if rule != "" {
			hint += " The setting that would refuse it is " + rule + "."
		}
		return hint
	}
	switch rule {
	case "hostSecurity.network.allowedDomains":
		return "Refused by hostSecurity.network.allowedDomains (the domain is not listed). To allow it: add the domain there " +
			"(all groups), or for this group only run " + setSec + ` with {"network":{"allowedDomains":[…]}} (it replaces the global list).`
	case "hostSecurity.network.deniedDomains":
		return "Refused by hostSecurity.network.deniedDomains (the domain is listed there). To allow it: remove it from that list."
	case "hostSecurity.tools":
		return "Refused by hostSecurity.tools (the tool is not granted to this group). To allow it: add the tool there (all groups), " +
			"or for this group only run " + setSec + ` with {"tools":[…]} (it replaces the global list).`
	case "hostSecurity.denyRead":
		return "Refused by a deny rule: the path is in hostSecurity.denyRead, or belongs to the daemon or another group, which no group may touch. " +
			"To allow it: remove the matching pattern from hostSecurity.denyRead (a group override can only add to that list); " + showCmd + " lists the rules."
	case "hostSecurity.allowWrite":
		return "Refused because the path is not writable for this group. To allow it: add the path to hostSecurity.allowWrite, " +
			"or for this group only run " + setSec + ` with {"allowWrite":[…]}.`
	case "confinement":
		return "The path is outside what this group's sandbox shows. To allow it: add it to hostSecurity.allowRead or allowWrite; " +
			showCmd + " lists what the sandbox shows."
	case "agent.limits":
		return "The limits of a confined run are agent.limits in the config (" + showCmd + " lists them); " +
			"if the group needs more, raise them there, or ask it to work on less at once or clean up its folder."
	case "relay":
		return "No configuration change allows this: the model-API relay forwards only the Messages API (POST /v1/messages and its count_tokens), " +
			"so the group's placeholder credential is good for nothing else of your account."
	case "ipc":
		return "No configuration change allows this: a group may only act for itself. " +
			"If you did not expect it, look at what the group's agent was asked to do."
	case groupfs.Rule:
		return "No configuration change allows this: nanoclawd never follows a link a group puts in its own directories (it could lead anywhere on this machine). " +
			"The group goes on working; if you did not expect it, look at what the group's agent was asked to do."
	}
	return "See " + showCmd + " for the group's effective policy."
}

// defaultRule is the rule behind a violation that does not name one.
func defaultRule(v security.Violation) string {
	switch v.Kind {
	case security.KindNetwork:
		return "hostSecurity.network.allowedDomains"
	case security.KindTool:
		return "hostSecurity.tools"
	case security.KindFilesystem, security.KindPermission:
		switch v.Tool {
		case "Write", "Edit", "MultiEdit", "NotebookEdit":
			return "hostSecurity.allowWrite"
		}
		return "hostSecurity.denyRead"
	case security.KindLimit:
		return "agent.limits"
	case security.KindIPC:
		return "ipc"
	}
	return ""
}

// GroupNotice is the plain message a group receives when its agent's run
// ended with blocked actions and sent the group nothing, so the people
// there know why nothing happened and whom to ask. It contains no
// agent-supplied text.
func GroupNotice(assistantName string) string {
	name := clean(strings.TrimSpace(assistantName), maxGroup)
	if name == "" {
		name = "The assistant"
	}
	return fmt.Sprintf("%s could not do this: the request needed something this group's security settings do not allow. "+
		"Please ask the admin to change the group's restrictions if it should be allowed.", name)
}
