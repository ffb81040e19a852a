// Package router takes inbound chat messages to their group's agent and
// the agent's answers back: messages are stored, triggers matched, runs
// queued, prompts built from everything unanswered, and the answered
// position moved only together with the answer.
package router

import (
	"os"
	"path/filepath"
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
	// ReplyTo and Quoted: the sender and text of the message this one
	// replies to, when the channel says ("" when it does not).
	ReplyTo, Quoted string
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// FormatPrompt writes messages, oldest first, as the agent's prompt, with
// their times in zone (named zoneName in the header, so the agent reads
// "18:00" as the chat does).
func FormatPrompt(msgs []PromptMessage, zone *time.Location, zoneName string) string {
	var b strings.Builder
	if zoneName != "" {
		b.WriteString(`<context timezone="`)
		b.WriteString(xmlEscaper.Replace(zoneName))
		b.WriteString("\" />\n")
	}
	b.WriteString("<messages>\n")
	for _, m := range msgs {
		b.WriteString(`<message sender="`)
		b.WriteString(xmlEscaper.Replace(m.Sender))
		b.WriteString(`" time="`)
		b.WriteString(m.Time.In(zone).Format(time.RFC3339))
		b.WriteString(`"`)
		if m.Quoted != "" || m.ReplyTo != "" {
			b.WriteString(` reply_to="`)
			b.WriteString(xmlEscaper.Replace(m.ReplyTo))
			b.WriteString(`"><quoted>`)
			b.WriteString(xmlEscaper.Replace(m.Quoted))
			b.WriteString(`</quoted>`)
		} else {
			b.WriteString(`>`)
		}
		b.WriteString(xmlEscaper.Replace(m.Text))
		b.WriteString("</message>\n")
	}
	b.WriteString("</messages>")
	return b.String()
}

// ScheduledMark starts the prompt of every scheduled task run, so the
// agent knows no one in the chat just asked.
const ScheduledMark = "[SCHEDULED TASK - The following message was sent automatically and is not coming directly from the user or group.]"

// ZoneName is loc's IANA name; for the system's zone (time.Local), the one
// TZ or the system names, or "" when none can be found.
func ZoneName(loc *time.Location) string {
	if n := loc.String(); n != "Local" {
		return n
	}
	if tz := strings.TrimPrefix(os.Getenv("TZ"), ":"); tz != "" && !filepath.IsAbs(tz) {
		return tz
	}
	if b, err := os.ReadFile("/etc/timezone"); err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b))
	}
	if target, err := os.Readlink("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(target, "zoneinfo/"); ok {
			return name
		}
	}
	return ""
}

var internalRE = regexp.MustCompile(`(?s)<internal>.*?</internal>`)

// StripInternal removes the agent's <internal>…</internal> notes and the
// space around what is left.
func StripInternal(s string) string {
	return strings.TrimSpace(internalRE.ReplaceAllString(s, ""))
}
