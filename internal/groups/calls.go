package groups

import (
	"github.com/nanoclawd/nanoclawd/internal/prompt"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Calls tells whether a message from sender calls g's assistant: in the
// main group every message does; elsewhere one from an allowed sender
// (the group's senders, when it has any) that holds the trigger, unless
// the group needs none. The rest stays context for the next call.
func (g Group) Calls(sender, text string) bool {
	if g.IsMain {
		return true
	}
	if !g.allows(sender) {
		return false
	}
	return !g.RequiresTrigger || prompt.Triggers(text, g.Trigger)
}

// MayReset tells whether sender may start the group's conversation
// afresh: who may call its assistant, whatever the trigger.
func (g Group) MayReset(sender string) bool { return g.IsMain || g.allows(sender) }

// allows tells whether sender is among the group's senders, when it
// names any.
func (g Group) allows(sender string) bool {
	return g.Security == nil || len(g.Security.Senders) == 0 || security.SenderAllowed(g.Security.Senders, sender)
}
