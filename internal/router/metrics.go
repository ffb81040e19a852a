package router

import "time"

// Observer is told what only the router sees (internal/metrics): how
// long each run took, and how long a message waited for its agent.
type Observer interface {
	RunDone(ok bool, took time.Duration)
	AgentStarted(wait time.Duration)
}

// observeStart tells Metrics how long the newest message of a run waited
// from its arrival until the agent started (a standby's hand-over counts
// as the start: at picked, when the run took the prompt).
func (r *Router) observeStart(arrived, picked time.Time, run **agentRun) {
	if r.Metrics == nil || *run == nil {
		return
	}
	started := (*run).startTime()
	if started.IsZero() {
		started = picked
	}
	r.Metrics.AgentStarted(started.Sub(arrived))
}
