package whatsapp

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
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
	// Emphasis must open and close on a character that is neither space
	// nor the marker, so globs like **/*.pem stay as they are.
	both   = regexp.MustCompile(`\*\*\*([^\s*](?:.*?[^\s*])?)\*\*\*`)
	bold   = regexp.MustCompile(`\*\*([^\s*](?:.*?[^\s*])?)\*\*|__([^\s_](?:.*?[^\s_])?)__`)
	italic = regexp.MustCompile(`\*([^\s*](?:[^*]*?[^\s*])?)\*`)
	strike = regexp.MustCompile(`~~(\S(?:.*?\S)?)~~`)
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
	s = emphasize(s, both, boldMark+"_", "_"+boldMark)
	s = emphasize(s, bold, boldMark, boldMark)
	s = emphasize(s, italic, "_", "_")
	s = emphasize(s, strike, "~", "~")
	return strings.ReplaceAll(s, boldMark, "*")
}

// emphasize rewrites the matches of re that stand at word edges (nothing
// but space or punctuation other than "*" and "/" on either side) to
// open + inner + close; others, like the stars of **/*.pem or a*b*c, stay.
func emphasize(s string, re *regexp.Regexp, open, close string) string {
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringSubmatchIndex(s, -1) {
		start, end := m[0], m[1]
		if !edge(s[:start], true) || !edge(s[end:], false) {
			continue
		}
		inner := ""
		for g := 2; g+1 < len(m); g += 2 {
			if m[g] >= 0 {
				inner = s[m[g]:m[g+1]]
				break
			}
		}
		b.WriteString(s[last:start])
		b.WriteString(open + inner + close)
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}

// edge says whether the text beside a marker (before it when before, else
// after it) leaves the marker at a word edge.
func edge(beside string, before bool) bool {
	var r rune
	if before {
		r, _ = utf8.DecodeLastRuneInString(beside)
	} else {
		r, _ = utf8.DecodeRuneInString(beside)
	}
	if r == utf8.RuneError { // start or end of the text
		return true
	}
	return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '*' && r != '/'
}
