package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/status"
)

// events is GET /events, server-sent events: "violation" for each new
// record of the audit trail, "state" when a group's state changes,
// "channel" when a channel connects or drops, "alert" when the model API
// gets a standing problem. Each stream looks at the database and the
// daemon's report every EventsEvery, so nothing elsewhere has to publish.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		plain(w, http.StatusInternalServerError, "streaming is not supported here")
		return
	}
	ctx := r.Context()
	last, err := alerts.LastID(ctx, s.o.DB)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	fmt.Fprint(w, "retry: 2000\n: connected\n\n")
	fl.Flush()
	var prev *status.Report
	tick := time.NewTicker(s.o.EventsEvery)
	defer tick.Stop()
	for {
		if last, prev, err = s.news(ctx, w, last, prev); err != nil {
			if ctx.Err() == nil {
				s.o.Log.Warn().Err(err).Msg("console: events")
			}
			return
		}
		fl.Flush()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// news writes what happened since the last look.
func (s *Server) news(ctx context.Context, w http.ResponseWriter, last int64, prev *status.Report) (int64, *status.Report, error) {
	send := func(event string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		return err
	}
	vs, err := alerts.After(ctx, s.o.DB, last, "", 100)
	if err != nil {
		return last, prev, err
	}
	for _, v := range vs {
		if err := send("violation", v); err != nil {
			return last, prev, err
		}
		last = v.ID
	}
	rep, err := s.o.Status(ctx)
	if err != nil {
		return last, prev, err
	}
	if prev != nil {
		was := map[string]string{}
		for _, g := range prev.Groups {
			was[g.Folder] = stateOf(g)
		}
		for _, g := range rep.Groups {
			if st := stateOf(g); was[g.Folder] != st {
				if err := send("state", map[string]string{"group": g.Folder, "state": st}); err != nil {
					return last, prev, err
				}
			}
		}
		conn := map[string]bool{}
		for _, c := range prev.Channels {
			conn[c.Name] = c.Connected
		}
		for _, c := range rep.Channels {
			if was, ok := conn[c.Name]; ok && was != c.Connected {
				if err := send("channel", c); err != nil {
					return last, prev, err
				}
			}
		}
		known := map[string]bool{}
		for _, h := range prev.ModelAPI {
			known[h.Kind] = true
		}
		for _, h := range rep.ModelAPI {
			if !known[h.Kind] {
				if err := send("alert", h); err != nil {
					return last, prev, err
				}
			}
		}
	}
	// A comment line: keeps proxies from closing an idle stream and
	// tells a closed one apart at the next write.
	if _, err := fmt.Fprint(w, ": tick\n\n"); err != nil {
		return last, prev, err
	}
	return last, &rep, nil
}
