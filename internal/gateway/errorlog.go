package gateway

import (
	"log"
	"strings"

	"github.com/rs/zerolog"
)

// net/http and httputil.ReverseProxy write their own complaints ("http:
// proxy error: …") with the standard library's log, straight to stderr,
// beside the daemon's lines and in another format. Here they go through
// the daemon's logger instead.

// errorLog is a standard logger whose lines are the daemon's warnings.
func errorLog(l zerolog.Logger) *log.Logger { return log.New(warnWriter{l}, "", 0) }

type warnWriter struct{ l zerolog.Logger }

func (w warnWriter) Write(p []byte) (int, error) {
	w.l.Warn().Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
