package router

import (
	"context"
)

// When no model upstream answers a run's request, its relay gives up and
// says so on the channel the run handed it (gateway.Config.Unanswered).
// The daemon, not the SDK's retry policy, then ends the attempt: the chat
// hears the one plain sentence at once and the agent's process group is
// stopped, so the SDK's own retries (minutes of them, measured) never
// happen. The relay answers anything the agent still asks with the same
// error, sending nothing upstream.

// endWhenUnanswered waits for the relay's word; then the prompt waiting
// for an answer gets the failure's sentence, and end stops the agent.
func (a *agentRun) endWhenUnanswered(ctx context.Context, unanswered <-chan string, end context.CancelFunc) {
	select {
	case <-ctx.Done():
		return
	case why := <-unanswered:
		a.mu.Lock()
		a.unanswered = why
		if a.awaitsAnswer() {
			a.onError(context.WithoutCancel(ctx), why)
		}
		a.told = true // nothing to retry or report again
		a.mu.Unlock()
		a.router.Log.Warn().Str("group", a.group.Folder).Msg("no model upstream answers: the agent is stopped and its chat told")
		end()
	}
}

// awaitsAnswer reports whether the run holds a prompt not yet answered:
// a message batch handed over, or a task that has had no result. Called
// with mu held.
func (a *agentRun) awaitsAnswer() bool {
	if a.cur.messages() {
		return a.cur.matched < len(a.cur.batches)
	}
	return a.answered == 0 && !a.told
}

// unansweredWhy is the relay's error if it gave up on the run, else "".
func (a *agentRun) unansweredWhy() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.unanswered
}
