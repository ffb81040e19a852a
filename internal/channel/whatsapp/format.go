package whatsapp

import (
	"regexp"
	"strings"
)

// ToWhatsApp turns the Markdown agents write into WhatsApp's own
// formatting: **bold** and __bold__ become *bold*, *italic* becomes
// _italic_, ~~strike~~ ~strike~, headings bold lines, "*"/"+" bullets "-"
// bullets, [text](url) "text (url)". Code (`inline` and ``` fenced blocks,
// which WhatsApp shows in monospace) is passed through untouched, without
// the fence's language tag. No Go library for this is maintained, and the
// mapping is a handful of rules, so it is written here.
func ToWhatsApp(md string) string {
	lines := strings.Split(md, "\n")
	inFence := false
	for i, line := range lines {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			if !inFence {
				lines[i] = line[:strings.Index(line, "```")+3] // drop the language tag
			}
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		lines[i] = formatLine(line)
	}
	return strings.Join(lines, "\n")
}

var (
	heading = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	bullet  = regexp.MustCompile(`^(\s*)[*+]\s+`)
	rule    = regexp.MustCompile(`^\s{0,3}([-*_])(\s*[-*_]){2,}\s*$`)
	mdLink  = regexp.MustCompile(`!?\[([^\]\n]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	both    = regexp.MustCompile(`\*\*\*(\S(?:.*?\S)?)\*\*\*`)
	bold    = regexp.MustCompile(`\*\*(\S(?:.*?\S)?)\*\*|__(\S(?:.*?\S)?)__`)
	italic  = regexp.MustCompile(`\*(\S(?:[^*]*?\S)?)\*`)
	strike  = regexp.MustCompile(`~~(\S(?:.*?\S)?)~~`)
)

// boldMark stands for WhatsApp's "*" while the italic rule (which rewrites
// single asterisks) runs.
const boldMark = "\x00"

// formatLine converts one line outside fenced code.
func formatLine(line string) string {
	if rule.MatchString(line) { // WhatsApp has no rule; a line of bars reads as one
		return "―――"
	}
	if m := heading.FindStringSubmatch(line); m != nil {
		inner := strings.Trim(formatInline(m[1]), "*")
		if inner == "" {
			return ""
		}
		return "*" + inner + "*"
	}
	line = bullet.ReplaceAllString(line, "$1- ")
	return formatInline(line)
}

// formatInline converts emphasis and links, leaving `code spans` alone.
func formatInline(s string) string {
	var b strings.Builder
	for {
		start := strings.Index(s, "`")
		if start < 0 {
			b.WriteString(convertSpans(s))
			return b.String()
		}
		end := strings.Index(s[start+1:], "`")
		if end < 0 {
			b.WriteString(convertSpans(s))
			return b.String()
		}
		end += start + 2
		b.WriteString(convertSpans(s[:start]))
		b.WriteString(s[start:end])
		s = s[end:]
	}
}

func convertSpans(s string) string {
	s = mdLink.ReplaceAllStringFunc(s, func(m string) string {
		sub := mdLink.FindStringSubmatch(m)
		text, url := sub[1], sub[2]
		if text == "" || text == url || strings.TrimPrefix(url, "mailto:") == text {
			return url
		}
		return text + " (" + url + ")"
	})
	s = both.ReplaceAllString(s, boldMark+"_${1}_"+boldMark)
	s = bold.ReplaceAllStringFunc(s, func(m string) string {
		sub := bold.FindStringSubmatch(m)
		return boldMark + sub[1] + sub[2] + boldMark
	})
	s = italic.ReplaceAllString(s, "_${1}_")
	s = strike.ReplaceAllString(s, "~${1}~")
	return strings.ReplaceAll(s, boldMark, "*")
}
