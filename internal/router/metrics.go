package router

import (
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/messages"
)

// Observer is told what only the router sees (internal/metrics): how
// long each run took, and how long a message waited until an agent took
// it (start says how: metrics.StartCold, StartStandby, StartFollowUp).
type Observer interface {
	RunDone(took time.Duration)
	AgentStarted(start string, wait time.Duration)
}

// observeStart tells Metrics that an agent took a batch whose newest
// message arrived at arrived (zero: a task's run, nothing to tell). It is
// on the way from a message to its agent: no SQL, no wait.
func (r *Router) observeStart(start string, arrived time.Time) {
	if r.Metrics != nil && !arrived.IsZero() {
		r.Metrics.AgentStarted(start, time.Since(arrived))
	}
}

// arrivals remembers when the newest message of each registered chat
// reached the router. A message's own time is the sender's, to the second
// on WhatsApp and Telegram: too coarse for a wait of milliseconds.
type arrivals struct {
	mu   sync.Mutex
	last map[string]arrival // chat JID →
}

type arrival struct {
	seq int64
	at  time.Time
}

func (a *arrivals) note(chat string, seq int64, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.last == nil {
		a.last = map[string]arrival{}
	}
	a.last[chat] = arrival{seq, at}
}

// of is when the last to arrive of msgs (a batch of chat's) arrived: as
// noted, or its own time when it came before the daemon started or
// another message came since.
func (a *arrivals) of(chat string, msgs []messages.Stored) time.Time {
	newest := msgs[0]
	for _, m := range msgs {
		if m.Seq > newest.Seq {
			newest = m
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if l, ok := a.last[chat]; ok && l.seq == newest.Seq {
		return l.at
	}
	return newest.Time
}
