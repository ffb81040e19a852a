package protocol

// search_history: the request's fields read into a Search, and the
// messages its verdict carries. Pure, so the MCP server refuses a bad
// request as the daemon would, before writing it.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Search bounds.
const (
	DefaultSearchLimit = 20
	MaxSearchLimit     = 100
	maxQueryWords      = 16
	maxQueryBytes      = 1000
)

// Search is a search_history request, read: the words to find (all of
// them), the chat, and the time range [Since, Until) (zero: open).
type Search struct {
	Words        []string
	Chat         string // "" = the asking group's own chat
	Since, Until time.Time
	Limit        int
}

// Found is one message of a search_history verdict.
type Found struct {
	ID         string `json:"id"`
	ChatJID    string `json:"chatJid"`
	Sender     string `json:"sender"`
	SenderName string `json:"senderName"`
	Time       string `json:"time"` // RFC 3339
	Text       string `json:"text"`
}

// Search reads r's search fields; a date without a time (YYYY-MM-DD) is
// that day in loc, and until includes it.
func (r Request) Search(loc *time.Location) (Search, error) {
	s := Search{Chat: r.ChatJID, Limit: DefaultSearchLimit}
	if len(r.Query) > maxQueryBytes {
		return s, fmt.Errorf("query: at most %d bytes; search for a few words", maxQueryBytes)
	}
	// Control characters part words like spaces: not a word of any
	// message, and a NUL ended the index's reading of the query halfway.
	for _, w := range strings.FieldsFunc(r.Query, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) {
		// Words only: a token of punctuation alone (an FTS operator such
		// as "*" or "-") would match nothing and say nothing.
		if strings.ContainsFunc(w, func(c rune) bool { return unicode.IsLetter(c) || unicode.IsDigit(c) }) {
			s.Words = append(s.Words, w)
		}
	}
	if len(s.Words) == 0 {
		return s, errors.New("query: give one or more words to look for, such as \"plumber\"")
	}
	if len(s.Words) > maxQueryWords {
		return s, fmt.Errorf("query: at most %d words (all must occur in a message)", maxQueryWords)
	}
	if r.Limit != "" {
		n, err := strconv.Atoi(r.Limit)
		if err != nil || n < 1 || n > MaxSearchLimit || strings.ContainsAny(r.Limit, "+-") {
			return s, fmt.Errorf("limit %.20q: digits, 1 to %d (default %d)", r.Limit, MaxSearchLimit, DefaultSearchLimit)
		}
		s.Limit = n
	}
	var err error
	if s.Since, err = searchTime("since", r.Since, loc, false); err != nil {
		return s, err
	}
	if s.Until, err = searchTime("until", r.Until, loc, true); err != nil {
		return s, err
	}
	if !s.Since.IsZero() && !s.Until.IsZero() && !s.Since.Before(s.Until) {
		return s, fmt.Errorf("since %s is not before until %s", r.Since, r.Until)
	}
	return s, nil
}

// searchTime reads since or until: "" is open, a date its day's start
// (until: the next day's, so the day is included), RFC 3339 the instant
// (until: the next millisecond, so that instant is included).
func searchTime(field, v string, loc *time.Location, end bool) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseInLocation(time.DateOnly, v, loc); err == nil {
		if end {
			d = d.AddDate(0, 0, 1)
		}
		return d, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %.40q: a date (2026-03-31) or an RFC 3339 time (2026-03-31T18:00:00Z)", field, v)
	}
	if end {
		t = t.Add(time.Millisecond)
	}
	return t, nil
}

// MatchExpr is the FTS5 query for words: each word an FTS5 string, so
// that quotes, operators (AND, OR, NOT, NEAR, *, ^, column:) are only
// text, and all of them must occur.
func MatchExpr(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
	}
	return strings.Join(quoted, " ")
}
