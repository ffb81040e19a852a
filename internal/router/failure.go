package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nanoclawd/nanoclawd/internal/failure"
	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// An agent's error result (status "error": the model API unreachable, the
// credential refused, the API overloaded) is answered in its chat at once
// with one plain sentence (package failure finds its words), and the
// owner's main chat gets the detail once per kind of failure.Failure, until an
// agent answers again. A failure a retry cannot fix (a refused credential,
// an invalid request) also ends the run, instead of leaving it to wait for
// follow-ups that would fail the same way.

// toldError is a run's error that its chat was already told about: the
// queue neither retries it nor tells the chat again.
type toldError struct{ err error }

func (e *toldError) Error() string { return e.err.Error() }
func (e *toldError) Unwrap() error { return e.err }

func isTold(err error) bool {
	var t *toldError
	return errors.As(err, &t)
}

// ownerNotes remembers which kinds of failure the main chat has heard of,
// so a failing API is reported once, not once per message.
type ownerNotes struct {
	mu   sync.Mutex
	told map[string]bool
}

// first reports whether kind is news to the owner, and marks it told.
func (n *ownerNotes) first(kind string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.told[kind] {
		return false
	}
	if n.told == nil {
		n.told = map[string]bool{}
	}
	n.told[kind] = true
	return true
}

// clear forgets every failure: an agent answered, so the next failure is
// news again.
func (n *ownerNotes) clear() {
	n.mu.Lock()
	n.told = nil
	n.mu.Unlock()
}

// failureNotice is the chat's answer to an agent's error, errText, in
// group g; it tells the main chat the detail once (unless ownerTold: the
// relay already did). In the main chat itself
// the answer carries the detail.
func (r *Router) failureNotice(ctx context.Context, g groups.Group, f failure.Failure, errText string, ownerTold bool) string {
	name := r.Config().AssistantName
	detail := failure.WithoutSDKHints(failure.Redact(firstLine(errText, 300)))
	f.Fix = strings.ReplaceAll(f.Fix, "FOLDER", g.Folder)
	if g.IsMain {
		r.owner.first(f.Kind)
		return fmt.Sprintf("%s could not answer: %s. %s\n(The agent said: %s)", name, f.What, f.Fix, detail)
	}
	if r.owner.first(f.Kind) && !ownerTold {
		r.Outbox.TellMain(ctx, fmt.Sprintf("nanoclawd: the assistant of %s (%s) could not answer: %s. %s\n(The agent said: %s)",
			g.Name, g.Folder, f.What, f.Fix, detail))
	}
	return fmt.Sprintf("%s could not answer: %s. The owner was told.", name, f.What)
}
