package gateway

import (
	"context"
	"errors"
	"log"
	"net/http"
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

// proxyError is the relay's ReverseProxy ErrorHandler: the answer the
// default gives (502, no body), logged as the daemon logs. An agent that
// hung up is no news.
func (r *Run) proxyError(w http.ResponseWriter, req *http.Request, err error) {
	ev := r.cfg.Log.Warn()
	if req.Context().Err() != nil || errors.Is(err, context.Canceled) {
		ev = r.cfg.Log.Debug()
	}
	ev.Err(err).Str("group", r.cfg.Group).Msg("model-API relay: the request to the model API failed")
	w.WriteHeader(http.StatusBadGateway)
}
