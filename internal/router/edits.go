package router

import (
	"context"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// onChange applies an edit or a deletion to a message the agent has not
// answered yet: a deleted one is removed, so it never reaches the agent as
// if it were current; an edited one gets its new text. done is false when
// the message is already answered (or unknown): then an edit is stored as
// a new message, marked "(edited)", and a deletion is dropped.
func (r *Router) onChange(ctx context.Context, g groups.Group, m *channel.Message) (done bool, err error) {
	if m.Revokes != "" {
		return true, r.Messages.Revoke(ctx, m.ChatJID, m.Revokes)
	}
	edited, err := r.Messages.Edit(ctx, m.ChatJID, m.Replaces, m.Text)
	if err != nil {
		return true, err
	}
	if !edited {
		m.Text = "(edited) " + m.Text
		return false, nil
	}
	r.maybeRun(g, m.Sender, m.Text)
	return true, nil
}

// maybeRun queues a run of g for a new (or newly edited) message: while an
// agent runs there, or when the message calls the assistant.
func (r *Router) maybeRun(g groups.Group, sender, text string) {
	r.lock()
	running := r.active[g.Folder]
	r.mu.Unlock()
	if running || calls(g, sender, text) {
		r.Queue.EnqueueMessages(g.Folder)
	}
}
