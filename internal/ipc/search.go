package ipc

// search_history: decided like any other file (Authorize: a group its own
// chat, main any registered chat) and journaled, but it changes nothing;
// its answer is the verdict, read from the messages' full-text index after
// the journal commits, outside any write transaction.

import (
	"context"
	"errors"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

// statusOK is the verdict of a search answered.
const statusOK = "ok"

// searchOf reads an accepted search_history request of group from; a
// request without chatJid searches from's own chat.
func (w *Watcher) searchOf(from groups.Group, r protocol.Request) *protocol.Search {
	loc := w.cfg.Location
	if loc == nil {
		loc = time.Local
	}
	s, err := r.Search(loc)
	if err != nil {
		return nil // decoded already; the verdict says to ask again
	}
	if s.Chat == "" {
		s.Chat = from.JID
	}
	return &s
}

// reread recovers the search of an entry recorded before a restart from
// its file f, which is still there with the recorded content: the journal
// keeps the verdict, not the question.
func (v *view) reread(ctx context.Context, e *entry, f *file) {
	if e.typ != protocol.TypeSearchHistory || e.status != statusSent || e.search != nil {
		return
	}
	from, ok, err := v.groupByFolder(ctx, e.folder)
	if err != nil || !ok {
		return
	}
	if r, err := protocol.DecodeRequest(f.data, nil); err == nil {
		e.search = v.w.searchOf(from, r)
	}
}

// verdict is what the agent is told about e: for a search, its answer.
func (w *Watcher) verdict(ctx context.Context, e *entry) (protocol.Verdict, error) {
	if e.typ != protocol.TypeSearchHistory || e.status != statusSent {
		return e.verdict(), nil
	}
	if e.search == nil {
		return protocol.Verdict{Status: statusRefused, Reason: "nanoclawd restarted before it answered this search; search again"}, nil
	}
	found, err := w.cfg.Messages.Search(ctx, e.search.Chat, *e.search)
	if errors.Is(err, messages.ErrBadQuery) {
		// The query's fault: answered, not tried again as a failure.
		return protocol.Verdict{Status: statusRefused, Reason: "query: " + err.Error()}, nil
	}
	if err != nil {
		return protocol.Verdict{}, err
	}
	return protocol.Verdict{Status: statusOK, Messages: &found}, nil
}
