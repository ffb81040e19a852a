package telegram

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

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
