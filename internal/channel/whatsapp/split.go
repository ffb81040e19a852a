package whatsapp

import (
	"strings"
	"unicode/utf8"
)

// maxPart is the longest text sent as one WhatsApp message. WhatsApp takes
// far more, but a wall of text is unreadable on a phone and very long
// messages are cut behind "Read more"; a few messages read better.
const maxPart = 4000

// splitText cuts text into parts of at most max characters (runes),
// preferring to cut between paragraphs, then between lines, then between
// words, and only as a last resort inside a word. Parts are trimmed of the
// blank lines at the cut. Text that fits is returned as it is.
func splitText(text string, max int) []string {
	if utf8.RuneCountInString(text) <= max {
		return []string{text}
	}
	var parts []string
	for rest := text; rest != ""; {
		if utf8.RuneCountInString(rest) <= max {
			parts = append(parts, rest)
			break
		}
		// Look two runes further, so a break just after the limit counts.
		look := prefixRunes(rest, max+2)
		cut := -1
		for _, sep := range []string{"\n\n", "\n", " "} {
			i := strings.LastIndex(look, sep)
			for i > 0 && utf8.RuneCountInString(look[:i]) > max {
				i = strings.LastIndex(look[:i], sep)
			}
			if i > 0 {
				cut = i
				break
			}
		}
		if cut < 0 {
			cut = len(prefixRunes(rest, max))
		}
		if part := strings.TrimRight(rest[:cut], " \n"); part != "" {
			parts = append(parts, part)
		}
		rest = strings.TrimLeft(rest[cut:], " \n")
	}
	return parts
}

// prefixRunes is the longest prefix of s with at most n runes.
func prefixRunes(s string, n int) string {
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		if size == 0 {
			break
		}
		i += size
	}
	return s[:i]
}
