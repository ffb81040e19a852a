package telegram

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// tokenRE is the shape of every token @BotFather hands out: the bot's
// number, a colon and 35 URL-safe characters (e.g. 123456789:AAH…).
var tokenRE = regexp.MustCompile(`^[0-9]{1,20}:[A-Za-z0-9_-]{35}$`)

// ErrTokenShape: a token that cannot be a bot token.
var ErrTokenShape = errors.New("is not a bot token")

// CheckToken tells whether token has the shape of a bot token, and if not,
// what is wrong with it, in words that do not give the token away.
func CheckToken(token string) error {
	if tokenRE.MatchString(token) {
		return nil
	}
	id, secret, ok := strings.Cut(token, ":")
	what := fmt.Sprintf("the part after the colon is %d characters long", len(secret))
	switch {
	case strings.TrimSpace(token) != token:
		what = "it has a space or line break at one end"
	case !ok:
		what = "it has no colon"
	case id == "" || len(id) > 20 || strings.Trim(id, "0123456789") != "":
		what = "the part before the colon is not the bot's number"
	default:
		for i, r := range secret {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				what = fmt.Sprintf("character %d after the colon is not a letter, digit, _ or -", i+1)
				break
			}
		}
	}
	return fmt.Errorf("%w (%s): a token is the bot's number, a colon and 35 letters, digits, _ or - (e.g. 123456789:AAH…); "+
		"copy it again from @BotFather (/token)", ErrTokenShape, what)
}

// redactor hides the token in text bound for a log, a status line or a
// chat. The token is part of every request's URL, and errors quote URLs in
// many ways: as they are, %-escaped, Go-quoted (%q turns a control
// character into \x01), JSON-escaped (\u0001), or with the bot's number
// and the secret apart. Each of these forms is replaced, of the whole token
// and of the secret after its colon alone.
type redactor []string

func newRedactor(token string) redactor {
	var forms redactor
	add := func(s string) {
		if len(s) >= 4 && !slices.Contains(forms, s) {
			forms = append(forms, s)
		}
	}
	for _, s := range []string{token, secretOf(token)} {
		q := strconv.Quote(s)
		j, _ := json.Marshal(s)
		plain, _ := url.PathUnescape(s) // a %41 in the token reaches the server as A
		for _, f := range []string{s, q[1 : len(q)-1], string(j[1 : len(j)-1]), url.PathEscape(s), url.QueryEscape(s), plain} {
			add(f)
			// Quoted once more, as an error that quotes a quoted URL does.
			q2 := strconv.Quote(f)
			add(q2[1 : len(q2)-1])
		}
	}
	// Longer forms first, so a form that holds another is hidden whole.
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return forms
}

// secretOf is the part of a token after its first colon, or all of it.
func secretOf(token string) string {
	if _, s, ok := strings.Cut(token, ":"); ok {
		return s
	}
	return token
}

// String hides every form of the token in s.
func (r redactor) String(s string) string {
	for _, f := range r {
		s = strings.ReplaceAll(s, f, "<token>")
	}
	return s
}

// Err is err with its text redacted; errors.Is and As still see through it.
func (r redactor) Err(err error) error {
	if err == nil {
		return nil
	}
	msg := r.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return redactedErr{msg: msg, err: err}
}

// redactedErr is an error whose text no longer holds the token.
type redactedErr struct {
	msg string
	err error
}

func (e redactedErr) Error() string { return e.msg }
func (e redactedErr) Unwrap() error { return e.err }
