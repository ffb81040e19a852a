// Package prompt is what an agent is given to read and what it may keep
// to itself: the XML a batch of chat messages becomes (Format), whether a
// message calls the assistant by its trigger, a scheduled task's prompt,
// and the <internal> notes stripped from an answer.
package prompt

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

// Message is one message as the agent sees it.
type Message struct {
	ID         string // the chat's id of it, for a reaction or a quote
	SenderName string
	Time       time.Time
	Text       string // a file's caption; a reaction's emoji
	// Media is the marker of a file sent with it, shown before the text.
	Media string
	// What the message replies to, if it is a reply.
	QuotedID, QuotedSender, QuotedText string
	// ReactTo makes it a reaction to the message with that id.
	ReactTo string
}

// maxExcerpt bounds the quoted text shown with a reply: enough to know
// which message it answers; the whole of it was in an earlier prompt.
const maxExcerpt = 200

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// Format writes messages, oldest first, as the agent's prompt: the
// messages with their local times (RFC 3339, with the zone's offset), then
// a line naming the time zone, so "tomorrow at nine" means what the group
// means.
func Format(msgs []Message, loc *time.Location) string {
	var b strings.Builder
	b.WriteString("<messages>\n")
	for _, m := range msgs {
		elem := "message"
		if m.ReactTo != "" {
			elem = "reaction"
		}
		b.WriteString("<" + elem)
		attr(&b, "id", m.ID)
		attr(&b, "sender", m.SenderName)
		attr(&b, "time", m.Time.In(loc).Format(time.RFC3339))
		if m.ReactTo != "" {
			attr(&b, "to", m.ReactTo)
		}
		b.WriteString(">")
		if m.QuotedText != "" || m.QuotedID != "" {
			b.WriteString("<quote")
			if m.QuotedID != "" {
				attr(&b, "id", m.QuotedID)
			}
			attr(&b, "sender", m.QuotedSender)
			b.WriteString(">")
			b.WriteString(xmlEscaper.Replace(excerpt(m.QuotedText)))
			b.WriteString("</quote>")
		}
		text := m.Text
		if m.Media != "" {
			text = strings.TrimSpace(m.Media + " " + text)
		}
		b.WriteString(xmlEscaper.Replace(text))
		b.WriteString("</" + elem + ">\n")
	}
	b.WriteString("</messages>")
	b.WriteString("\n<context timezone=\"")
	b.WriteString(xmlEscaper.Replace(zoneName(loc)))
	b.WriteString("\" />")
	return b.String()
}

// attr writes ` name="value"`, escaped.
func attr(b *strings.Builder, name, value string) {
	b.WriteString(" " + name + `="`)
	b.WriteString(xmlEscaper.Replace(value))
	b.WriteString(`"`)
}

// excerpt is the start of a quoted text, cut at a rune boundary.
func excerpt(s string) string {
	if utf8.RuneCountInString(s) <= maxExcerpt {
		return s
	}
	return string([]rune(s)[:maxExcerpt]) + "…"
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

// Scheduled marks a scheduled task's prompt as the daemon's, not a
// message from the group.
func Scheduled(prompt string) string {
	return "[SCHEDULED TASK] This run was started by a task scheduled in this group, not by a new message. " +
		"Do what it says; your reply goes to the group.\n\n" + prompt
}

var internalRE = regexp.MustCompile(`(?s)<internal>.*?</internal>`)

// StripInternal removes the agent's <internal>…</internal> notes and the
// space around what is left.
func StripInternal(s string) string {
	return strings.TrimSpace(internalRE.ReplaceAllString(s, ""))
}
