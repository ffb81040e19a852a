package router

import (
	"context"
	"time"
)

// standby is one agent started ahead, waiting for its first prompt (the
// pool: standbys.go).
type standby struct {
	run     *agentRun
	cancel  context.CancelFunc
	closing chan struct{} // closed: the agent is asked to finish (_close)
	done    chan error    // the run's end, for the one who adopted it
	ended   chan struct{} // closed once the agent process is gone
	since   time.Time     // when it was started (status shows its age)
	command string        // the agent.command it runs (commandKey)

	// Under the pool's mu.
	taken   bool // handed to a run
	stopped bool // told to stop (stale, expired, dropped, out of the most recent)
	expired bool // waited agent.warmFor for a prompt
}

// stop ends a standby that was never given work.
func (sb *standby) stop() { sb.cancel() }
