package gateway

import (
	"sync"
	"time"
)

// The relay, not the SDK's retry policy, decides when a run's model API
// has failed: the real SDK retried the relay's final error six times, a
// minute apart, whatever its headers said. So once no upstream answers,
// the relay gives up on the run for good: it tells the run's owner in the
// daemon (Config.Unanswered), which ends the attempt and tells the chat,
// and it answers every later request of the run at once with the same
// error, never sending it upstream again.
//
// With a single upstream a transient failure (429, 5xx, 529) is the API's
// to explain: it goes to the agent as it came, retry-after and all, so
// the SDK backs off as it would against the API. If that upstream has
// answered nothing but such failures for the timeout, the relay gives up
// all the same.

// outage is one run's relay's record of its upstreams not answering.
type outage struct {
	tell chan<- string // Config.Unanswered; nil: nobody to tell

	mu     sync.Mutex
	why    string      // the error the relay gave up with; "" while it has not
	streak *time.Timer // a single upstream failing transiently: gives up when it fires
	last   string      // the latest transient failure's error
	closed bool
}

// over is the error the relay gave up with, or "".
func (o *outage) over() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.why
}

// giveUp records why the relay gave up and tells the run's owner, once;
// it reports whether this call was the one that gave up.
func (o *outage) giveUp(why string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.why != "" || o.closed {
		return false
	}
	o.why = why
	if o.streak != nil {
		o.streak.Stop()
	}
	if o.tell != nil {
		select {
		case o.tell <- why:
		default: // buffered by the owner: it has one already
		}
	}
	return true
}

// transient records a transient failure of the run's single upstream and
// reports whether the agent may still hear it as it came (false: the
// relay has given up). The first failure of a streak starts its clock:
// when within starts nothing but failures came, fire gives up.
func (o *outage) transient(why string, within time.Duration, fire func(why string)) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.why != "" {
		return false
	}
	o.last = why
	if o.streak == nil {
		var t *time.Timer
		t = time.AfterFunc(within, func() {
			o.mu.Lock()
			current, last := o.streak == t, o.last
			o.mu.Unlock()
			if current { // not a streak an answer ended meanwhile
				fire(last)
			}
		})
		o.streak = t
	}
	return true
}

// answered ends a streak: the upstream answered.
func (o *outage) answered() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.streak != nil {
		o.streak.Stop()
		o.streak = nil
	}
}

// close stops the clock and tells nobody anything from now on: the run
// has ended.
func (o *outage) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.streak != nil {
		o.streak.Stop()
	}
}
