package standby

import (
	"context"
	"time"
)

// Standby is one agent started ahead, waiting for its first prompt (the
// pool: pool.go).
type Standby[A Agent] struct {
	Agent   A
	cancel  context.CancelFunc
	Closing chan struct{} // closed: the agent is asked to finish (_close)
	Done    chan error    // the run's end, for the one who adopted it
	Ended   chan struct{} // closed once the agent process is gone
	since   time.Time     // when it was started (status shows its age)
	command string        // the agent.command it runs (commandKey)
	folder  string        // its group's

	// Under the pool's mu.
	taken   bool // handed to a run
	stopped bool // told to stop (stale, expired, dropped, out of the most recent)
	expired bool // waited agent.warmFor for a prompt
}

// Stop ends a standby that was never given work.
func (sb *Standby[A]) Stop() { sb.cancel() }
