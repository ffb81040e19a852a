package channel

import (
	"context"
	"sync"
)

// Told remembers what a channel told its sink of each chat: its name and
// that it is a group. A message's chat is recorded by the sink's
// OnMessage itself (by id and time), so a channel calls OnChat beside a
// message only for what that does not tell and the sink was not told yet:
// one chat record per message. The zero value is ready for use.
type Told struct {
	mu    sync.Mutex
	chats map[string]Chat
}

// Knows says whether the sink already knows c's name (if it has one) and
// that it is a group (if it is one).
func (t *Told) Knows(c Chat) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := t.chats[c.JID]
	return (c.Name == "" || c.Name == k.Name) && (!c.IsGroup || k.IsGroup)
}

// Tell passes c to the sink's OnChat and remembers what it was told.
func (t *Told) Tell(ctx context.Context, sink Sink, c Chat) error {
	if err := sink.OnChat(ctx, c); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.chats == nil {
		t.chats = map[string]Chat{}
	}
	k := t.chats[c.JID]
	k.IsGroup = k.IsGroup || c.IsGroup
	if c.Name != "" {
		k.Name = c.Name
	}
	t.chats[c.JID] = k
	return nil
}
