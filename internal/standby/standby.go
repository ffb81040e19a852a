package standby

import (
	"context"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// Agent is one agent process started ahead, as the pool sees it.
type Agent interface {
	Running() <-chan struct{} // closed once its process runs
	Fingerprint() string      // what it was started with (policy, options, session, command)
	Early() bool              // it answered before it was given a prompt
}

// Starter starts agents for the pool (the router).
type Starter[A Agent] interface {
	// New is an agent for g that will wait for its first prompt.
	New(g groups.Group) A
	// Run runs a until it ends; closing closed asks it to finish.
	Run(ctx context.Context, a A, closing <-chan struct{}) error
	// Fingerprint is what a fresh run of g would be started with now.
	Fingerprint(ctx context.Context, g groups.Group) (string, error)
}

// Standby is one agent started ahead, waiting for its first prompt (the
// pool: pool.go). Who takes it hands its agent the prompt.
type Standby[A Agent] struct {
	Agent   A
	cancel  context.CancelFunc
	closing chan struct{} // closed: the agent is asked to finish (_close)
	done    chan error    // the run's end, for the one who adopted it
	ended   chan struct{} // closed once the agent process is gone
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

// Close asks a taken standby's agent to finish (_close); once.
func (sb *Standby[A]) Close() { close(sb.closing) }

// Ended is closed once the agent process is gone.
func (sb *Standby[A]) Ended() <-chan struct{} { return sb.ended }

// Wait returns the end of its agent's run, for the one who took it; once.
func (sb *Standby[A]) Wait() error { return <-sb.done }
