// Package router takes inbound chat messages to their group's agent and
// the agent's answers back: messages are stored, triggers matched, runs
// queued, prompts built from everything unanswered, and the answered
// position moved only together with the answer.
package router

import (
	"os"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Triggers reports whether text starts with trigger, ignoring case and
// leading space, and the trigger ends at a word boundary ("@Andy," yes,
// "@Andyx" no).
func Triggers(text, trigger string) bool {
	trigger = strings.TrimSpace(trigger)
	if trigger == "" {
		return false
	}
	text = strings.TrimLeftFunc(text, unicode.IsSpace)
	if len(text) < len(trigger) || !strings.EqualFold(text[:len(trigger)], trigger) {
		return false
	}
	next, _ := utf8.DecodeRuneInString(text[len(trigger):])
	return next == utf8.RuneError || !(unicode.IsLetter(next) || unicode.IsDigit(next) || next == '_')
}

// PromptMessage is one message as the agent sees it.
type PromptMessage struct {
	Sender string
	Time   time.Time
	Text   string
	// What the message replies to, if it is a reply.
	QuotedSender, QuotedText string
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// FormatPrompt writes messages, oldest first, as the agent's prompt: the
// messages with their local times (RFC 3339, with the zone's offset), then
// a line naming the time zone, so "tomorrow at nine" means what the group
// means.
func FormatPrompt(msgs []PromptMessage, loc *time.Location) string {
	var b strings.Builder
	b.WriteString("<messages>\n")
	for _, m := range msgs {
		b.WriteString(`<message sender="`)
		b.WriteString(xmlEscaper.Replace(m.Sender))
		b.WriteString(`" time="`)
		b.WriteString(m.Time.In(loc).Format(time.RFC3339))
		b.WriteString(`">`)
		if m.QuotedText != "" {
			b.WriteString(`<quote sender="`)
			b.WriteString(xmlEscaper.Replace(m.QuotedSender))
			b.WriteString(`">`)
			b.WriteString(xmlEscaper.Replace(m.QuotedText))
			b.WriteString("</quote>")
		}
		b.WriteString(xmlEscaper.Replace(m.Text))
		b.WriteString("</message>\n")
	}
	b.WriteString("</messages>")
	b.WriteString("\n<context timezone=\"")
	b.WriteString(xmlEscaper.Replace(zoneName(loc)))
	b.WriteString("\" />")
	return b.String()
}

// zoneName is loc's IANA name; the system's zone is named by the TZ it
// came from when Go knows it, else by its abbreviation now.
func zoneName(loc *time.Location) string {
	if name := loc.String(); name != "Local" {
		return name
	}
	if tz := os.Getenv("TZ"); tz != "" {
		return strings.TrimPrefix(tz, ":")
	}
	if target, err := os.Readlink("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(target, "zoneinfo/"); ok {
			return name
		}
	}
	name, _ := time.Now().In(loc).Zone()
	return name
}

// ScheduledPrompt marks a scheduled task's prompt as the daemon's, not a
// message from the group.
func ScheduledPrompt(prompt string) string {
	return "[SCHEDULED TASK] This run was started by a task scheduled in this group, not by a new message. " +
		"Do what it says; your reply goes to the group.\n\n" + prompt
}

var internalRE = regexp.MustCompile(`(?s)<internal>.*?</internal>`)

// StripInternal removes the agent's <internal>…</internal> notes and the
// space around what is left.
func StripInternal(s string) string {
	return strings.TrimSpace(internalRE.ReplaceAllString(s, ""))
}
