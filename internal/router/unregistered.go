package router

import (
	"maps"
	"strings"
	"sync"
)

// unregistered counts the messages this daemon heard from chats no group
// has, so that a message that got no answer is never a silent mystery:
// the first from each chat is logged with the command that registers it,
// and status lists them all.
type unregistered struct {
	mu     sync.Mutex
	counts map[string]int
}

// add counts one message from jid and reports whether it is the chat's first.
func (u *unregistered) add(jid string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.counts == nil {
		u.counts = map[string]int{}
	}
	u.counts[jid]++
	return u.counts[jid] == 1
}

// forget drops jid, registered since.
func (u *unregistered) forget(jid string) {
	u.mu.Lock()
	delete(u.counts, jid)
	u.mu.Unlock()
}

// Unregistered is how many messages each chat no group has sent since
// the daemon started (status shows it).
func (r *Router) Unregistered() map[string]int {
	r.unheard.mu.Lock()
	defer r.unheard.mu.Unlock()
	return maps.Clone(r.unheard.counts)
}

// heardUnregistered notes a message from jid, which no group has.
// WhatsApp's status updates and channels are not chats anyone registers.
func (r *Router) heardUnregistered(jid string) {
	if strings.HasSuffix(jid, "@broadcast") || strings.HasSuffix(jid, "@newsletter") {
		return
	}
	if r.unheard.add(jid) {
		r.Log.Warn().Str("chat", jid).Msgf("a message from a chat no group has: nothing answers it; to register it: nanoclawd groups add --jid %s --name NAME --folder FOLDER", jid)
	}
}
