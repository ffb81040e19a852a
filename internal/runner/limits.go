package runner

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// limits ends an agent that overstays. Three clocks, each on its own, so
// none postpones another:
//   - the hard limit of a turn (Spec.Timeout), from the start of the turn
//     — the run's start, the first prompt of an agent started ahead, or
//     its last answer — to its next answer, whatever else is happening;
//   - the idle limit (Spec.IdleTimeout without output): _close, then
//     CloseGrace to exit;
//   - SIGKILL KillGrace after SIGTERM.
//
// An agent started ahead (Spec.Prompted) is under neither turn limit
// until it is given its first prompt.
type limits struct {
	p   *process
	ctx context.Context

	hard, idle, closeGrace, grace <-chan time.Time // nil: not running
	hardTimer, idleTimer          *time.Timer
	idleDeadline                  time.Time
	answers                       bool // it answered at least once
	lastChance                    bool // the hard limit gave a quiet agent KillGrace to exit on _close
	killed                        bool // SIGTERM was sent
}

// wait returns once the agent's process has exited.
func (l *limits) wait() {
	spec, out := l.p.spec, l.p.out
	defer l.stopTimers()
	prompted := spec.Prompted
	if prompted == nil {
		l.startTurn()
	}
	closing := spec.Closing
	ctxDone := l.ctx.Done()
	for {
		select {
		case <-l.p.exited:
			return
		case <-prompted:
			prompted = nil
			l.p.log.Printf("given its first prompt: the turn limits start")
			l.startTurn()
		case <-l.p.activity:
			l.resetIdle()
		case <-l.p.answered:
			l.onAnswer()
		case <-l.idle:
			l.closeIdle()
		case <-closing:
			closing = nil
			l.writeClose("asked to finish")
		case <-l.closeGrace:
			l.closeGrace = nil
			out.TimedOut = true
			l.terminate(fmt.Sprintf("still running %s after the idle _close", spec.CloseGrace))
		case <-l.hard:
			l.hard = nil
			l.onHard()
		case <-ctxDone:
			ctxDone = nil
			l.terminate("cancelled")
		case <-l.grace:
			l.grace = nil
			l.p.log.Printf("still running %s after SIGTERM: SIGKILL to process group %d", spec.KillGrace, l.p.pgid)
			syscall.Kill(-l.p.pgid, syscall.SIGKILL)
		}
	}
}

// startTurn starts the clocks of a turn.
func (l *limits) startTurn() {
	spec := l.p.spec
	if spec.Timeout > 0 {
		l.hardTimer = time.NewTimer(spec.Timeout)
		l.hard = l.hardTimer.C
	}
	if spec.IdleTimeout > 0 {
		l.idleTimer = time.NewTimer(spec.IdleTimeout)
		l.idleDeadline = time.Now().Add(spec.IdleTimeout)
		l.idle = l.idleTimer.C
	}
}

func (l *limits) stopTimers() {
	for _, t := range []*time.Timer{l.hardTimer, l.idleTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// onAnswer starts the next turn. The timeout bounds one turn: an agent
// that keeps answering a live conversation is not cut off mid-chat. The
// idle deadline moves first, so with equal limits it is never the later
// one.
func (l *limits) onAnswer() {
	l.answers = true
	l.resetIdle()
	if l.hardTimer != nil && !l.lastChance {
		l.hardTimer.Reset(l.p.spec.Timeout)
		l.hard = l.hardTimer.C
	}
}

// onHard ends an agent at its hard limit.
func (l *limits) onHard() {
	spec := l.p.spec
	if l.answers && !l.lastChance && !l.killed {
		// The turn ended with an answer and the agent is quiet (with equal
		// limits the idle deadline falls due at this moment): it gets
		// _close and KillGrace to take the clean way out.
		if l.idleTimer != nil && !time.Now().Before(l.idleDeadline) {
			l.closeIdle()
		}
		if l.p.out.Closed {
			l.lastChance = true
			l.hardTimer.Reset(spec.KillGrace)
			l.hard = l.hardTimer.C
			return
		}
	}
	l.p.out.TimedOut = true
	l.terminate(fmt.Sprintf("hard timeout %s", spec.Timeout))
}

// terminate ends the agent, once: SIGTERM to its process group, or for
// an agent with a lifeline (a confined run) the lifeline closed (end), and
// SIGKILL to the group KillGrace later. A sandbox's processes are not in
// the group: its first process gives the agent SIGTERM and ends them all
// when the lifeline closes.
func (l *limits) terminate(why string) {
	if l.killed {
		return
	}
	l.killed = true
	if l.p.spec.Lifeline {
		l.p.log.Printf("%s: closing the lifeline of process group %d", why, l.p.pgid)
	} else {
		l.p.log.Printf("%s: SIGTERM to process group %d", why, l.p.pgid)
	}
	l.p.end(syscall.SIGTERM)
	l.grace = time.After(l.p.spec.KillGrace)
}

// writeClose asks the agent to finish (_close), once.
func (l *limits) writeClose(why string) {
	if l.p.out.Closed {
		return
	}
	l.p.out.Closed = true
	l.p.log.Printf("%s: writing _close", why)
	if err := Close(context.WithoutCancel(l.ctx), l.p.spec.IPCDir, l.p.spec.Reporter); err != nil {
		l.p.log.Printf("writing _close: %v", err)
	}
}

// resetIdle restarts the idle clock, unless _close was written.
func (l *limits) resetIdle() {
	if l.idleTimer != nil && !l.p.out.Closed {
		l.idleTimer.Reset(l.p.spec.IdleTimeout)
		l.idleDeadline = time.Now().Add(l.p.spec.IdleTimeout)
	}
}

// closeIdle ends a quiet agent the clean way: _close, then CloseGrace to
// exit.
func (l *limits) closeIdle() {
	if l.p.out.Closed || l.killed {
		return
	}
	l.idle = nil
	l.writeClose(fmt.Sprintf("no output for %s", l.p.spec.IdleTimeout))
	l.closeGrace = time.After(l.p.spec.CloseGrace)
}
