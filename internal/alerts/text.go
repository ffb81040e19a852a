package alerts

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
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
func sanitize(v Violation) Violation {
	v.Group = clean(v.Group, maxGroup)
	v.Kind = clean(v.Kind, maxKind)
	v.Tool = clean(v.Tool, maxTool)
	v.Target = clean(v.Target, maxStoredField)
	v.Detail = clean(v.Detail, maxStoredDet)
	v.Action = "blocked"
	return v
}

// headline is the first line of an alert after the marker and count:
// which group, which tool, what was blocked, and the target.
func headline(v Violation) string {
	group, tool, target := show(v.Group, maxGroup), show(v.Tool, maxTool), show(v.Target, maxAlertTarget)
	var what string
	switch v.Kind {
	case "network":
		what = "network access to"
	case "filesystem":
		what = "file access to"
	case "tool":
		what = "use on"
	case "permission":
		what = "permission for"
	case "ipc":
		return fmt.Sprintf("group %q tried to act as another group (%s): %s", group, tool, target)
	case "limit":
		return fmt.Sprintf("group %q: the run went over its %s limit and was stopped", group, target)
	default:
		what = show(v.Kind, maxKind) + " access to"
	}
	return fmt.Sprintf("group %q: %s was denied %s %s", group, tool, what, target)
}

// alertText is the message for the first violation of a (group, kind, target).
func alertText(v Violation) string {
	var b strings.Builder
	b.WriteString("[SANDBOX ALERT] ")
	b.WriteString(headline(v))
	if v.Detail != "" {
		b.WriteString("\nDetail: ")
		b.WriteString(show(v.Detail, maxAlertDetail))
	}
	b.WriteString("\n")
	b.WriteString(fixHint(v))
	return b.String()
}

// summaryText folds n repeats, the latest being v, seen within cooldown.
func summaryText(v Violation, n int, cooldown time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[SANDBOX ALERT] +%d more (within %s): ", n, cooldown)
	b.WriteString(headline(v))
	if v.Detail != "" {
		b.WriteString("\nLast detail: ")
		b.WriteString(show(v.Detail, maxAlertDetail))
	}
	b.WriteString("\n")
	b.WriteString(fixHint(v))
	return b.String()
}

// fixHint says what to change in the configuration to allow the action.
func fixHint(v Violation) string {
	folder := show(v.Group, maxGroup)
	setSec := fmt.Sprintf("nanoclawd groups set-security %s --file OVERRIDE.json", folder)
	target := show(v.Target, maxAlertTarget)
	switch v.Kind {
	case "network":
		host := hostOf(target)
		return fmt.Sprintf("To allow it: add %s to hostSecurity.network.allowedDomains in the config (all groups), "+
			"or for this group only run `%s` with %s (the override replaces the global list); "+
			"remove it from network.deniedDomains if listed there.",
			jsonText(host), setSec, jsonText(map[string]any{"network": map[string]any{"allowedDomains": []string{host}}}))
	case "filesystem":
		read := "to read it, remove the matching pattern from hostSecurity.denyRead in the config (a group override can only add to that list)"
		write := fmt.Sprintf("to write it, add the path to hostSecurity.allowWrite, or for this group only run `%s` with %s",
			setSec, jsonText(map[string]any{"allowWrite": []string{target}}))
		switch v.Tool {
		case "Read", "Glob", "Grep":
			return "To allow it: " + read + "."
		case "Write", "Edit", "MultiEdit", "NotebookEdit":
			return "To allow it: " + write + "."
		}
		return "To allow it: " + read + "; " + write + "."
	case "tool", "permission":
		tool := show(v.Tool, maxTool)
		return fmt.Sprintf("To allow it: add %s to hostSecurity.tools in the config, or for this group only run `%s` "+
			"with {\"tools\":[…, %s]} (the override replaces the global list).", jsonText(tool), setSec, jsonText(tool))
	case "limit":
		return "The limits of a confined run are fixed (`nanoclawd security show " + folder + "` lists them); " +
			"if the group needs more, ask it to work on less at once, or to clean up its folder."
	case "ipc":
		return "No configuration change allows this: a group may only act for itself. " +
			"If you did not expect it, look at what the group's agent was asked to do."
	}
	return fmt.Sprintf("See `nanoclawd security show %s` for the group's effective policy.", folder)
}

// hostOf strips a port from "host:port".
func hostOf(target string) string {
	if h, _, err := net.SplitHostPort(target); err == nil {
		return h
	}
	return target
}

// jsonText renders v as compact JSON without HTML escaping.
func jsonText(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
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
