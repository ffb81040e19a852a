package telegram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// However an error quotes the token — as it is, Go-quoted (a stray
// control character becomes \x01), JSON-escaped (\u0001), %-escaped, or
// with the bot's number apart from the secret — neither the log nor the
// status line shows it.
func TestRedaction(t *testing.T) {
	const fragment = "AAHdqTcvCH1vGWJ" // in every form of the token below
	for _, tok := range []string{
		"123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ",
		"123456789:AAHdqTcvCH1vGWJ\x01fSeofSAs0K5PALDsawQ",
		"123456789:AAHdqTcvCH1vGWJ/fSeofSAs0K5PAL%41Dsaw\u00e9\n",
	} {
		var log bytes.Buffer
		c := &Channel{redact: newRedactor(tok), blocked: map[string]time.Time{}, log: zerolog.New(&log)}
		_, reqErr := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/bot"+tok+"/getMe", nil)
		if reqErr == nil {
			reqErr = errors.New("no error for " + tok)
		}
		id, secret, _ := strings.Cut(tok, ":")
		quoted, _ := json.Marshal(tok)
		errs := []error{
			reqErr,
			&url.Error{Op: "Post", URL: "http://127.0.0.1:1/bot" + tok + "/getMe", Err: errors.New("connection refused")},
			fmt.Errorf("body %s", quoted),
			fmt.Errorf("path %s and %s", url.PathEscape(tok), url.QueryEscape(tok)),
			fmt.Errorf("bot %s, secret %q", id, secret),
			fmt.Errorf("twice: %q", fmt.Sprintf("%q", tok)),
		}
		for _, err := range errs {
			r := c.redact.Err(err)
			c.log.Warn().Err(r).Msg("bot api")
			c.down(err.Error())
			if !errors.Is(r, err) {
				t.Errorf("the redacted error does not wrap the original: %v", r)
			}
			for what, s := range map[string]string{"error": r.Error(), "status": c.Status()} {
				if strings.Contains(s, fragment) || !strings.Contains(s, "<token>") {
					t.Errorf("%s shows the token %q: %s", what, tok, s)
				}
			}
		}
		if strings.Contains(log.String(), fragment) {
			t.Errorf("the log shows the token %q:\n%s", tok, log.String())
		}
	}
}
