// Package fit makes text for a person fit a terminal: `nanoclawd status`
// and `doctor` keep every line of their text output within Width columns,
// cutting what a table column cannot hold (the --json output has it all)
// and wrapping sentences.
package fit

import (
	"strings"
	"unicode/utf8"
)

// Width is the terminal width the text output keeps to.
const Width = 100

// Len is how many columns s takes (one a character).
func Len(s string) int { return utf8.RuneCountInString(s) }

// Cut makes s one line of at most n characters, "…" where it was cut.
func Cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:max(n-1, 0)]) + "…"
	}
	return s
}

// Wrap writes the words of s after first, breaking them at spaces into
// lines of at most Width characters; the lines after the first start with
// indent. Only a word longer than a whole line is broken inside.
func Wrap(first, s, indent string) string {
	var lines []string
	line := first
	for _, word := range strings.Fields(s) {
		sep := " "
		if line == "" || line == indent || strings.HasSuffix(line, " ") {
			sep = ""
		}
		if Len(line)+Len(sep)+Len(word) > Width && line != indent {
			lines = append(lines, strings.TrimRight(line, " "))
			line, sep = indent, ""
		}
		line += sep
		for k := Width - Len(line); Len(word) > k && k > 0; k = Width - Len(line) {
			r := []rune(word)
			lines = append(lines, line+string(r[:k]))
			line, word = indent, string(r[k:])
		}
		line += word
	}
	return strings.Join(append(lines, line), "\n")
}
