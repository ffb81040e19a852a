package console

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/status"
)

// liveKeep is how many events the live column shows, also after a reload.
const liveKeep = 20

// event is one line of the live column: "violation" (a new record of the
// audit trail), "state" (a group's state changed), "channel" (a channel
// connected or dropped) or "alert" (the model API has a new problem).
type event struct {
	ID    int64         `json:"id"`
	Kind  string        `json:"-"`
	Class string        `json:"class"` // violation, state or channel: how the line looks
	Time  string        `json:"time"`
	Text  string        `json:"text"`
	Group string        `json:"group,omitempty"` // state: which group is now State
	State string        `json:"state,omitempty"`
	Row   *violationRow `json:"row,omitempty"` // violation: its row of the audit tables
}

// hub keeps the newest events and wakes the streams that wait for more.
// One watcher (Server.watch) looks for news while a stream is open, so
// any number of open pages cost one look a tick, and none cost nothing.
type hub struct {
	mu       sync.Mutex
	recent   []event // oldest first, at most liveKeep
	next     int64   // the next event's id
	lastRow  int64   // the newest audit record seen
	changed  chan struct{}
	watchers int
	wake     chan struct{}
}

func newHub() *hub {
	// Ids start at the clock, so a page's Last-Event-ID from before a
	// restart is older than every new event.
	return &hub{next: time.Now().UnixMilli(), changed: make(chan struct{}), wake: make(chan struct{}, 1)}
}

func (h *hub) add(e event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e.ID, h.next = h.next, h.next+1
	if e.Row != nil {
		h.lastRow = max(h.lastRow, e.Row.ID)
	}
	h.recent = append(h.recent, e)
	if len(h.recent) > liveKeep {
		h.recent = slices.Clone(h.recent[len(h.recent)-liveKeep:])
	}
	close(h.changed)
	h.changed = make(chan struct{})
}

// since returns the events after id and a channel closed at the next one.
func (h *hub) since(id int64) ([]event, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i, _ := slices.BinarySearchFunc(h.recent, id+1, func(e event, id int64) int { return cmp.Compare(e.ID, id) })
	return slices.Clone(h.recent[i:]), h.changed
}

// page is what a page shows of the live column: the newest first, and the
// id its stream continues after.
func (h *hub) page() ([]event, int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.recent)
	slices.Reverse(out)
	return out, h.next - 1
}

// watch counts an open stream; the returned func uncounts it.
func (h *hub) watch() func() {
	h.mu.Lock()
	h.watchers++
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
	return func() {
		h.mu.Lock()
		h.watchers--
		h.mu.Unlock()
	}
}

func (h *hub) watched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watchers > 0
}

// watch fills the hub: first the newest records of the audit trail, then,
// while a page is open, what happened each EventsEvery. Violations are
// read from the database, so none is missed while no page is open; state,
// channel and model-API changes are seen while one is.
func (s *Server) watch(ctx context.Context) {
	h := s.hub
	vs, err := alerts.Newest(ctx, s.o.DB, "", liveKeep)
	if err != nil && ctx.Err() == nil {
		s.o.Log.Warn().Err(err).Msg("console: the audit trail for the live column")
	}
	slices.Reverse(vs)
	s.addViolations(vs)
	tick := time.NewTicker(s.o.EventsEvery)
	defer tick.Stop()
	var prev *status.Report
	for {
		if !h.watched() {
			prev = nil // what changed unseen is not news
			select {
			case <-ctx.Done():
				return
			case <-h.wake:
			}
		}
		var err error
		if prev, err = s.look(ctx, prev); err != nil && ctx.Err() == nil {
			s.o.Log.Warn().Err(err).Msg("console: events")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (s *Server) addViolations(vs []alerts.Recorded) {
	for _, v := range vs {
		row := s.violationRow(v)
		class := "violation"
		if byOwner(v.Violation) {
			class = "state"
		}
		s.hub.add(event{Kind: "violation", Class: class, Time: row.Time, Text: row.What, Row: &row})
	}
}

// look adds what happened since the last look (prev: the report then).
func (s *Server) look(ctx context.Context, prev *status.Report) (*status.Report, error) {
	s.hub.mu.Lock()
	last := s.hub.lastRow
	s.hub.mu.Unlock()
	vs, err := alerts.After(ctx, s.o.DB, last, "", 100)
	if err != nil {
		return prev, err
	}
	s.addViolations(vs)
	rep, err := s.o.Status(ctx)
	if err != nil {
		return prev, err
	}
	now := s.clock(time.Now())
	if prev != nil {
		was := map[string]string{}
		for _, g := range prev.Groups {
			was[g.Folder] = stateOf(g)
		}
		for _, g := range rep.Groups {
			if st := stateOf(g); was[g.Folder] != st {
				s.hub.add(event{Kind: "state", Class: "state", Time: now, Text: g.Folder + " is " + st, Group: g.Folder, State: st})
			}
		}
		conn := map[string]bool{}
		for _, c := range prev.Channels {
			conn[c.Name] = c.Connected
		}
		for _, c := range rep.Channels {
			if was, ok := conn[c.Name]; ok && was != c.Connected {
				what := " disconnected: "
				if c.Connected {
					what = " connected: "
				}
				s.hub.add(event{Kind: "channel", Class: "channel", Time: now, Text: c.Name + what + c.State})
			}
		}
		known := map[string]bool{}
		for _, p := range prev.ModelAPI {
			known[p.Kind] = true
		}
		for _, p := range rep.ModelAPI {
			if !known[p.Kind] {
				s.hub.add(event{Kind: "alert", Class: "violation", Time: now,
					Text: fmt.Sprintf("The model API has a %s problem (HTTP %d): %s", p.Kind, p.Status, p.Detail)})
			}
		}
	}
	return &rep, nil
}

// events is GET /events, server-sent events of the hub: those after the
// page's own (?after=ID, or Last-Event-ID when the browser reconnects),
// then each as it comes. The stream ends with "ended" when the session
// does (logout, expiry); it does not keep the session alive.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		plain(w, http.StatusInternalServerError, "streaming is not supported here")
		return
	}
	ctx := r.Context()
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if id, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil {
		after = id
	}
	defer s.hub.watch()()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	fmt.Fprint(w, "retry: 2000\n: connected\n\n")
	fl.Flush()
	sess := sessionOf(r)
	tick := time.NewTicker(s.o.EventsEvery)
	defer tick.Stop()
	for {
		evs, changed := s.hub.since(after)
		for _, e := range evs {
			b, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Kind, b); err != nil {
				return
			}
			after = e.ID
		}
		fl.Flush()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
			if _, ok := s.auth.lookup(sess.id, time.Now(), false); !ok {
				fmt.Fprint(w, "event: ended\ndata: {}\n\n")
				fl.Flush()
				return
			}
			// A comment line: keeps proxies from closing an idle stream
			// and finds a closed one at the next write.
			if _, err := fmt.Fprint(w, ": tick\n\n"); err != nil {
				return
			}
		}
	}
}
