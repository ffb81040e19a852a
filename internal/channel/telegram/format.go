package telegram

import (
	"fmt"
	"html"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ToHTML renders the Markdown agents write as Telegram's HTML (the parse
// mode that needs the least escaping: only & < > in text, and " in an
// attribute): **bold**, *italic*, ~~strike~~, `code`, fenced blocks as
// <pre>, [text](url) links, headings as bold lines, bullets as "•".
// Everything else is text, escaped, so no input can make Telegram refuse
// the message for bad markup.
func ToHTML(md string) string {
	var out []string
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if lang, ok := fenceOpen(line); ok {
			var code []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				code = append(code, lines[i])
			}
			body := html.EscapeString(strings.Join(code, "\n"))
			if lang != "" {
				out = append(out, fmt.Sprintf(`<pre><code class="language-%s">%s</code></pre>`, html.EscapeString(lang), body))
			} else {
				out = append(out, "<pre>"+body+"</pre>")
			}
			continue
		}
		out = append(out, htmlLine(line))
	}
	return strings.Join(out, "\n")
}

func fenceOpen(line string) (lang string, ok bool) {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "```") {
		return "", false
	}
	lang = strings.TrimSpace(strings.TrimPrefix(t, "```"))
	if strings.ContainsAny(lang, " `") {
		lang = ""
	}
	return lang, true
}

var (
	heading = regexp.MustCompile(`^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$`)
	bullet  = regexp.MustCompile(`^(\s*)[*+-]\s+`)
	rule    = regexp.MustCompile(`^\s{0,3}([-*_])(\s*[-*_]){2,}\s*$`)
	codeRE  = regexp.MustCompile("`([^`\n]+)`")
	linkRE  = regexp.MustCompile(`!?\[([^\]\n]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// Emphasis opens and closes on a character that is neither space nor
	// the marker, so globs like **/*.pem stay as they are.
	bothRE = regexp.MustCompile(`\*\*\*([^\s*](?:.*?[^\s*])?)\*\*\*`)
	boldRE = regexp.MustCompile(`\*\*([^\s*](?:.*?[^\s*])?)\*\*|__([^\s_](?:.*?[^\s_])?)__`)
	// Italic also stands apart from letters and other asterisks.
	italicRE = regexp.MustCompile(`(^|[^\w*])\*([^\s*](?:[^*]*?[^\s*])?)\*($|[^\w*])`)
	strikeRE = regexp.MustCompile(`~~(\S(?:.*?\S)?)~~`)
	holeRE   = regexp.MustCompile("\x00([0-9]+)\x00")
)

// htmlLine renders one line outside fenced code.
func htmlLine(line string) string {
	if rule.MatchString(line) {
		return "―――"
	}
	if m := heading.FindStringSubmatch(line); m != nil {
		return "<b>" + inline(m[1]) + "</b>"
	}
	if loc := bullet.FindStringSubmatchIndex(line); loc != nil {
		return line[loc[2]:loc[3]] + "• " + inline(line[loc[1]:])
	}
	return inline(line)
}

// inline renders code spans and links first (their insides are not
// Markdown), holding them out of the text as numbered holes while the
// rest is escaped and its emphasis turned into tags.
func inline(s string) string {
	var holes []string
	hole := func(h string) string {
		holes = append(holes, h)
		return "\x00" + strconv.Itoa(len(holes)-1) + "\x00"
	}
	s = strings.ReplaceAll(s, "\x00", "")
	s = codeRE.ReplaceAllStringFunc(s, func(m string) string {
		return hole("<code>" + html.EscapeString(codeRE.FindStringSubmatch(m)[1]) + "</code>")
	})
	s = linkRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := linkRE.FindStringSubmatch(m)
		text := sub[1]
		if text == "" {
			text = sub[2]
		}
		return hole(`<a href="` + html.EscapeString(sub[2]) + `">` + html.EscapeString(text) + "</a>")
	})
	s = html.EscapeString(s)
	s = bothRE.ReplaceAllString(s, "<b><i>$1</i></b>")
	s = boldRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := boldRE.FindStringSubmatch(m)
		return "<b>" + sub[1] + sub[2] + "</b>"
	})
	// Twice: a match takes the character after it, which may be where
	// the next one starts ("*a* *b*").
	for range 2 {
		s = italicRE.ReplaceAllString(s, "$1<i>$2</i>$3")
	}
	s = strikeRE.ReplaceAllString(s, "<s>$1</s>")
	return holeRE.ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.Atoi(holeRE.FindStringSubmatch(m)[1])
		return holes[n]
	})
}

// maxText is Telegram's limit of one message's text, in UTF-16 code units
// after its markup is parsed; maxCaption a file's caption's.
const (
	maxText    = 4096
	maxCaption = 1024
)

// width is a text's length as Telegram counts it (UTF-16 code units).
func width(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// splitText cuts Markdown text into parts of at most max UTF-16 units,
// preferring to cut between paragraphs, then lines, then words, and only
// as a last resort inside a word. The parts are cut before rendering:
// markup only shrinks what is shown, so each rendered part fits too.
func splitText(text string, max int) []string {
	var parts []string
	for rest := text; rest != ""; {
		var part string
		part, rest = cutText(rest, max)
		if part != "" {
			parts = append(parts, part)
		}
	}
	return parts
}

// fenceClose ends a fenced code block that a cut left open.
const fenceClose = "\n```"

// cutText is the first part of text that splitText makes, and the rest. A
// cut inside fenced code closes the fence at the end of the part and opens
// it again (with its language) at the start of the rest, so that the next
// part is not rendered inside out.
func cutText(text string, max int) (part, rest string) {
	if width(text) <= max {
		return text, ""
	}
	for budget := max; ; budget = max - width(fenceClose) {
		look := prefixWidth(text, budget)
		cut := len(look)
		for _, sep := range []string{"\n\n", "\n", " "} {
			if i := strings.LastIndex(look, sep); i > 0 {
				cut = i
				break
			}
		}
		opener, inside := openFence(text[:cut])
		if !inside {
			return strings.TrimRight(text[:cut], " \n"), strings.TrimLeft(text[cut:], " \n")
		}
		if budget < max {
			// Inside code, spaces lead lines: only the line break goes.
			return strings.TrimRight(text[:cut], "\n") + fenceClose, opener + "\n" + strings.TrimLeft(text[cut:], "\n")
		}
	}
}

// openFence tells whether md ends inside fenced code, as ToHTML reads it,
// and if so the line that opened it.
func openFence(md string) (opener string, inside bool) {
	for _, line := range strings.Split(md, "\n") {
		switch {
		case inside && strings.HasPrefix(strings.TrimSpace(line), "```"):
			inside = false
		case !inside:
			if _, ok := fenceOpen(line); ok {
				opener, inside = strings.TrimSpace(line), true
			}
		}
	}
	return opener, inside
}

// prefixWidth is the longest prefix of s at most n UTF-16 units wide.
func prefixWidth(s string, n int) string {
	i, w := 0, 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if w+utf16.RuneLen(r) > n {
			break
		}
		w += utf16.RuneLen(r)
		i += size
	}
	return s[:i]
}
