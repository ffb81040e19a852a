package runner

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// process is one agent process of a run: its command, our ends of its
// pipes, its log, and what it has produced so far. Run drives it: start,
// watchLimits until it has exited, kill what it left, drain its output,
// result.
type process struct {
	spec *Spec
	h    Handler
	log  *runLog
	out  *Outcome

	cmd      *exec.Cmd
	pgid     int
	started  time.Time
	lifeline []*os.File // write end, read end; closing the write end tells the agent the run is over
	inW      *os.File   // its stdin
	outR     *os.File   // its stdout: frames
	errR     *os.File   // its stderr
	tail     *tail      // the end of its stderr, for an ExitError

	activity chan struct{} // any output (limits)
	answered chan struct{} // a result frame (limits)
	readers  chan struct{} // one per output stream read to its end
	exited   chan struct{} // closed once the process has exited (wait)
	waitErr  error         // cmd.Wait's, once reaped
	reaped   bool
}

// start starts the agent with env and stdin, tells the handler its pid,
// and starts reading its output and waiting for its exit.
func (p *process) start(env []string, stdin []byte) error {
	spec := p.spec
	cmd := exec.Command(spec.Command[0], spec.Command[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = env
	cmd.SysProcAttr = sysProcAttr()
	cmd.SysProcAttr.Credential = spec.Credential
	intoCgroup(cmd.SysProcAttr, spec.CgroupFD)
	if spec.Lifeline {
		lr, lw, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("agent lifeline pipe: %w", err)
		}
		p.lifeline = []*os.File{lw, lr}
		cmd.ExtraFiles = []*os.File{lr}
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, spec.ExtraFiles...)
	inR, inW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("agent stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return fmt.Errorf("agent stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return fmt.Errorf("agent stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW

	p.started = time.Now()
	p.log.Printf("start %s group=%s cmd=%q dir=%s session=%q scheduled=%t prompt=%dB",
		p.started.UTC().Format(time.RFC3339Nano), spec.Input.GroupFolder, spec.Command, spec.Dir,
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
		p.log.Printf("start failed: %v", err)
		return fmt.Errorf("starting agent %q in %s: %w (check agent.command)", spec.Command[0], spec.Dir, err)
	}
	p.cmd, p.inW, p.outR, p.errR = cmd, inW, outR, errR
	p.pgid = cmd.Process.Pid
	p.out.PID = p.pgid
	p.log.Printf("pid %d", p.pgid)
	p.h.OnStart(p.pgid)

	p.activity, p.answered = make(chan struct{}, 1), make(chan struct{}, 1)
	p.tail = newTail(4096)
	p.readers = make(chan struct{}, 2)
	p.exited = make(chan struct{})
	go p.feed(stdin)
	go p.read(outR, func(f *os.File) {
		p.readFrames(f)
		if e, ok := p.h.(OutputEnder); ok {
			e.OnOutputEnd()
		}
	})
	go p.read(errR, p.readStderr)
	go p.wait()
	return nil
}

// feed writes the ContainerInput to the agent's stdin. An agent that never
// reads stdin must not block us; EPIPE is its business.
func (p *process) feed(stdin []byte) {
	p.inW.Write(stdin)
	p.inW.Close()
}

// read reads one output stream to its end with readStream.
func (p *process) read(f *os.File, readStream func(*os.File)) {
	readStream(f)
	p.readers <- struct{}{}
}

// readStderr puts the agent's stderr in the log, keeping its tail.
func (p *process) readStderr(r *os.File) {
	readLines(r, p.spec.MaxLine, func(line []byte, cut bool) {
		p.touch()
		p.tail.add(line)
		p.log.Line("stderr", line, cut)
	})
}

// touch tells the limits the agent wrote something.
func (p *process) touch() { signal(p.activity) }

// answer tells the limits the agent gave a result.
func (p *process) answer() { signal(p.answered) }

// signal leaves a mark in ch, a channel of one, unless one is there already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// wait closes exited once the agent's process has exited. Where the
// process can be left unreaped (Linux), it is: its pid, and so its process
// group id, then cannot belong to a stranger when kill signals the group.
func (p *process) wait() {
	if awaitExit(p.pgid) != nil {
		p.waitErr, p.reaped = p.cmd.Wait(), true
	}
	close(p.exited)
}

// watchLimits holds the agent to its limits (limits.go) until it has
// exited, and reports whether it was sent SIGTERM.
func (p *process) watchLimits(ctx context.Context) bool {
	l := &limits{p: p, ctx: ctx}
	l.wait()
	return l.killed
}

// kill ends whatever the exited agent started and reaps it. The leader is
// gone; whatever it started dies with it. The leader is not reaped yet (on
// Linux), so its group id cannot belong to a stranger.
func (p *process) kill() {
	syscall.Kill(-p.pgid, syscall.SIGKILL)
	p.cutLifeline()
	if !p.reaped {
		p.waitErr = p.cmd.Wait()
	}
	p.inW.Close()
}

// drain waits for both output streams to be read to their end. A
// descendant that left the group could keep the pipes open; don't wait on
// it forever. But what the agent wrote before it exited is read however
// long a slow handler takes: only pipes that stay empty and open are cut.
func (p *process) drain() {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for n := 0; n < 2; {
		select {
		case <-p.readers:
			n++
			continue
		case <-tick.C:
		}
		if unread(p.outR) || unread(p.errR) {
			continue
		}
		p.log.Printf("output still open after the agent exited: a descendant escaped its process group")
		p.outR.Close()
		p.errR.Close()
		for ; n < 2; n++ {
			<-p.readers
		}
	}
	p.outR.Close()
	p.errR.Close()
}

// result fills in the outcome of the ended run and says how it ended;
// killed: the limits sent it SIGTERM.
func (p *process) result(ctx context.Context, killed bool) error {
	spec, out, state := p.spec, p.out, p.cmd.ProcessState
	out.Duration = time.Since(p.started)
	out.ExitCode = state.ExitCode()
	p.log.Printf("exit %s after %s (results=%d)", state, out.Duration.Round(time.Millisecond), out.Results)
	switch {
	case out.TimedOut && out.Results > 0 && out.Answered:
		// Every prompt was answered: the run did its work; the timeout
		// only ended what it was still doing after.
		p.log.Printf("the hard timeout ended the agent after its answer: not a failure")
		return nil
	case out.TimedOut:
		return fmt.Errorf("agent for %s after %s: %w", spec.Input.GroupFolder, spec.Timeout, ErrTimeout)
	case killed && ctx.Err() != nil:
		return fmt.Errorf("agent for %s stopped: %w", spec.Input.GroupFolder, ctx.Err())
	case p.waitErr != nil:
		ee := &ExitError{Code: out.ExitCode, StderrTail: p.tail.String()}
		if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ee.Signal = ws.Signal().String()
		}
		return fmt.Errorf("agent for %s (log %s): %w", spec.Input.GroupFolder, p.log.path, ee)
	}
	return nil
}

// end asks the agent to end: a confined one by closing its lifeline (its
// sandbox's first process then ends them all; a signal would reach only
// bubblewrap, which dies of it and, caught while it was still building
// the sandbox, left it running on its own), another with sig to its
// process group.
func (p *process) end(sig syscall.Signal) {
	if p.spec.Lifeline {
		p.cutLifeline()
	} else {
		syscall.Kill(-p.pgid, sig)
	}
}

// cutLifeline closes the daemon's end of the lifeline: the agent's first
// process reads EOF, the run is over.
func (p *process) cutLifeline() {
	if len(p.lifeline) > 0 {
		p.lifeline[0].Close()
	}
}

// release closes the lifeline once the run is over.
func (p *process) release() {
	for _, f := range p.lifeline {
		f.Close()
	}
}
