// Package runner runs agent processes: one process per run, with an
// environment built from scratch, the ContainerInput on stdin, result and
// violation frames parsed from stdout as they stream, everything else in a
// per-run log, idle and hard timeouts, and no process left behind. Queue
// decides which group's agent runs when: one per group, a bounded number
// overall, fair across groups, scheduled tasks first, failures retried.
// Run drives one process (process.go: start, frames.go: its stdout,
// limits.go: its clocks, then kill and drain); queue.go is Queue; the
// ledger, last runs and leftovers record what ran.
//
// The agent side of the protocol (package protocol, docs/protocol.md):
// stdin is one JSON object then EOF; stdout carries frames of exactly
// three lines
//
//	---NANOCLAW_OUTPUT_START---
//	{"status":"success","result":"…","newSessionId":"…"}
//	---NANOCLAW_OUTPUT_END---
//
// and follow-up messages arrive as files in <ipc>/input/, with an empty
// <ipc>/input/_close asking the agent to finish.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Defaults for the zero values of the Spec limits.
const (
	DefaultKillGrace   = 5 * time.Second
	DefaultCloseGrace  = 30 * time.Second
	DefaultMaxLine     = 1 << 20  // one frame or log line
	DefaultMaxLogBytes = 10 << 20 // one run's log file
)

var (
	// ErrTimeout is returned (wrapped) when the agent hit Spec.Timeout and was killed.
	ErrTimeout = errors.New("agent hit its hard timeout and was killed")
	// ErrBadSpec is returned (wrapped) when a Spec cannot be run as given.
	ErrBadSpec = errors.New("invalid agent spec")
)

// Result is one result frame.
type Result struct {
	Status       string  // "success" or "error"
	Result       *string // text for the chat; nil when the agent had nothing to say
	NewSessionID string
	Error        string
	CostUSD      *float64 // the agent's own cost estimate of the run so far, if it gave one
}

// Handler receives what a run produces. Its methods are called one at a
// time, in order (OnStart first, then frames as they stream), and never after
// Run has returned. A slow handler slows the agent's stdout, nothing else.
type Handler interface {
	OnStart(pid int)
	OnResult(Result)
	OnViolation(security.Violation)
}

// OutputEnder is a Handler that is told when the agent's output has ended
// (its stdout closed, every frame read): the agent is exiting.
type OutputEnder interface {
	OnOutputEnd()
}

// Outcome is what Run reports about a finished run, error or not.
type Outcome struct {
	PID          int
	ExitCode     int    // -1 when ended by a signal
	Results      int    // result frames seen
	NewSessionID string // the last non-empty newSessionId seen
	Closed       bool   // _close was written (idle timeout or Closing)
	TimedOut     bool   // the hard timeout fired
	Answered     bool   // the last frame was a result: nothing was left unanswered
	LogFile      string
	Duration     time.Duration
}

// ExitError is returned when the agent exited non-zero (or was killed by a
// signal it was not sent by us).
type ExitError struct {
	Code       int // -1 for a signal
	Signal     string
	StderrTail string
}

func (e *ExitError) Error() string {
	how := fmt.Sprintf("exited with status %d", e.Code)
	if e.Signal != "" {
		how = "was killed by " + e.Signal
	}
	if e.StderrTail == "" {
		return "agent " + how + " (no stderr)"
	}
	return "agent " + how + "; stderr ends with: " + e.StderrTail
}

// Run starts the agent, feeds it spec.Input, streams its frames to h and
// waits for it and everything it started to be gone. It returns an error for
// a non-zero exit (*ExitError), a hard timeout (ErrTimeout), a cancelled ctx
// (ctx.Err()), or a run that could not start. When ctx is cancelled or the
// timeout fires, the process group gets SIGTERM and, KillGrace later, SIGKILL.
func Run(ctx context.Context, spec Spec, h Handler) (Outcome, error) {
	spec.defaults()
	var out Outcome
	if err := spec.check(); err != nil {
		return out, err
	}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("agent for %s not started: %w", spec.Input.GroupFolder, err)
	}
	stdin, err := json.Marshal(spec.Input)
	if err != nil {
		return out, fmt.Errorf("%w: encoding ContainerInput for %s: %w", ErrBadSpec, spec.Input.GroupFolder, err)
	}
	env, err := buildEnv(spec.Env)
	if err != nil {
		return out, err
	}
	if err := clearInput(ctx, spec.IPCDir, spec.Reporter); err != nil {
		return out, err
	}
	log := openRunLog(ctx, spec.LogDir, spec.MaxLogBytes, spec.Reporter)
	defer log.Close()

	p := &process{spec: &spec, h: h, log: log, out: &out}
	defer p.release()
	err = p.start(env, stdin)
	if lerr := log.Made(); lerr != nil {
		if err == nil {
			// It started, but its output would have nowhere to go: it
			// ends at once.
			p.end(unix.SIGKILL)
			<-p.exited
			p.kill()
			p.drain()
		}
		return out, lerr
	}
	out.LogFile = log.path
	if err != nil {
		return out, err
	}
	killed := p.watchLimits(ctx)
	p.kill()
	p.drain()
	err = p.result(ctx, killed)
	return out, err
}

// logPath is the per-run log file name; sortable by start time.
func logPath(dir string) string {
	return filepath.Join(dir, "agent-"+time.Now().UTC().Format("20060102T150405.000000000Z")+".log")
}

// unread tells whether the pipe f still holds bytes nobody has read.
func unread(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), fionread) })
	return n > 0
}
