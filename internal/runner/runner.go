// Package runner runs agent processes: one process per run, with an
// environment built from scratch, the ContainerInput on stdin, result and
// violation frames parsed from stdout as they stream, everything else in a
// per-run log, idle and hard timeouts, and no process left behind. Queue
// decides which group's agent runs when: one per group, a bounded number
// overall, fair across groups, scheduled tasks first, failures retried.
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
	"os/exec"
	"path/filepath"
	"syscall"
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
}

// Handler receives what a run produces. Its methods are called one at a
// time, in order (OnStart first, then frames as they stream), and never after
// Run has returned. A slow handler slows the agent's stdout, nothing else.
type Handler interface {
	OnStart(pid int)
	OnResult(Result)
	OnViolation(security.Violation)
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
	log, err := openRunLog(ctx, spec.LogDir, spec.MaxLogBytes, spec.Reporter)
	if err != nil {
		return out, err
	}
	defer log.Close()
	out.LogFile = log.path

	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	cmd.SysProcAttr.Credential = spec.Credential
	intoCgroup(cmd.SysProcAttr, spec.CgroupFD)
	if spec.Lifeline {
		lr, lw, err := os.Pipe()
		if err != nil {
			return out, fmt.Errorf("agent lifeline pipe: %w", err)
		}
		defer lw.Close() // held until the run is over: its closing is the daemon's death
		defer lr.Close()
		cmd.ExtraFiles = []*os.File{lr}
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, spec.ExtraFiles...)
	inR, inW, err := os.Pipe()
	if err != nil {
		return out, fmt.Errorf("agent stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return out, fmt.Errorf("agent stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return out, fmt.Errorf("agent stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW

	started := time.Now()
	log.Printf("start %s group=%s cmd=%q dir=%s session=%q scheduled=%t prompt=%dB",
		started.UTC().Format(time.RFC3339Nano), spec.Input.GroupFolder, spec.Command, spec.Dir,
		spec.Input.SessionID, spec.Input.IsScheduledTask, len(spec.Input.Prompt))
	err = cmd.Start()
	// The child holds its own copies now; ours must go so EOF means "all writers gone".
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		log.Printf("start failed: %v", err)
		return out, fmt.Errorf("starting agent %q in %s: %w (check agent.command)", spec.Command[0], spec.Dir, err)
	}
	pgid := cmd.Process.Pid
	out.PID = pgid
	log.Printf("pid %d", pgid)
	h.OnStart(pgid)

	go func() {
		// An agent that never reads stdin must not block us; EPIPE is its business.
		inW.Write(stdin)
		inW.Close()
	}()

	activity := make(chan struct{}, 1)
	touch := func() {
		select {
		case activity <- struct{}{}:
		default:
		}
	}
	answered := make(chan struct{}, 1)
	tail := newTail(4096)
	readers := make(chan struct{}, 2)
	frames := &frameReader{spec: &spec, h: h, log: log, out: &out, touch: touch, answered: func() {
		select {
		case answered <- struct{}{}:
		default:
		}
	}}
	go func() {
		frames.read(outR)
		readers <- struct{}{}
	}()
	go func() {
		readLines(errR, spec.MaxLine, func(line []byte, cut bool) {
			touch()
			tail.add(line)
			log.Line("stderr", line, cut)
		})
		readers <- struct{}{}
	}()

	exited := make(chan struct{})
	var (
		waitErr error
		reaped  bool
	)
	go func() {
		if awaitExit(pgid) != nil {
			waitErr, reaped = cmd.Wait(), true
		}
		close(exited)
	}()

	lim := &limits{spec: &spec, log: log, out: &out, pgid: pgid, exited: exited, activity: activity, answered: answered}
	lim.wait(ctx)
	killed := lim.killed
	// The leader is gone; whatever it started dies with it. The leader is
	// not reaped yet (on Linux), so its group id cannot belong to a stranger.
	syscall.Kill(-pgid, syscall.SIGKILL)
	if !reaped {
		waitErr = cmd.Wait()
	}
	inW.Close()
	// A descendant that left the group could keep the pipes open; don't
	// wait on it forever. But what the agent wrote before it exited is read
	// however long a slow handler takes: only pipes that stay empty and
	// open are cut.
	drain := time.NewTicker(2 * time.Second)
	for n := 0; n < 2; {
		select {
		case <-readers:
			n++
			continue
		case <-drain.C:
		}
		if unread(outR) || unread(errR) {
			continue
		}
		log.Printf("output still open after the agent exited: a descendant escaped its process group")
		outR.Close()
		errR.Close()
		for ; n < 2; n++ {
			<-readers
		}
	}
	drain.Stop()
	outR.Close()
	errR.Close()

	out.Duration = time.Since(started)
	out.ExitCode = cmd.ProcessState.ExitCode()
	log.Printf("exit %s after %s (results=%d)", cmd.ProcessState, out.Duration.Round(time.Millisecond), out.Results)

	switch {
	case out.TimedOut && out.Results > 0 && out.Answered:
		// Every prompt was answered: the run did its work; the timeout
		// only ended what it was still doing after.
		log.Printf("the hard timeout ended the agent after its answer: not a failure")
		return out, nil
	case out.TimedOut:
		return out, fmt.Errorf("agent for %s after %s: %w", spec.Input.GroupFolder, spec.Timeout, ErrTimeout)
	case killed && ctx.Err() != nil:
		return out, fmt.Errorf("agent for %s stopped: %w", spec.Input.GroupFolder, ctx.Err())
	case waitErr != nil:
		ee := &ExitError{Code: out.ExitCode, StderrTail: tail.String()}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ee.Signal = ws.Signal().String()
		}
		return out, fmt.Errorf("agent for %s (log %s): %w", spec.Input.GroupFolder, log.path, ee)
	}
	return out, nil
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
