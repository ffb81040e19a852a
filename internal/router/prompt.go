// Package router takes inbound chat messages to their group's agent and
// the agent's answers back: messages are stored, triggers matched, runs
// queued, prompts built from everything unanswered, and the answered
// position moved only together with the answer.
package router

import (
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
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

// FormatPrompt writes messages, oldest first, as the agent's prompt.
func FormatPrompt(msgs []PromptMessage) string {
	var b strings.Builder
	b.WriteString("<messages>\n")
	for _, m := range msgs {
		b.WriteString(`<message sender="`)
		b.WriteString(xmlEscaper.Replace(m.Sender))
		b.WriteString(`" time="`)
		b.WriteString(m.Time.UTC().Format(time.RFC3339))
		b.WriteString(`">`)
		b.WriteString(xmlEscaper.Replace(m.Text))
		b.WriteString("</message>\n")
	}
	b.WriteString("</messages>")
	return b.String()
}

var internalRE = regexp.MustCompile(`(?s)<internal>.*?</internal>`)

// StripInternal removes the agent's <internal>…</internal> notes and the
// space around what is left.
func StripInternal(s string) string {
	return strings.TrimSpace(internalRE.ReplaceAllString(s, ""))
}
