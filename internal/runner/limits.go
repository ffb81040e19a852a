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
	spec     *Spec
	log      *runLog
	out      *Outcome
	pgid     int
	exited   <-chan struct{}
	activity <-chan struct{} // any output
	answered <-chan struct{} // a result frame

	killed bool // SIGTERM was sent
}

// wait returns once the agent's process has exited.
func (l *limits) wait(ctx context.Context) {
	spec := l.spec
	var (
		hard, idle, closeGrace, grace <-chan time.Time
		hardTimer, idleTimer          *time.Timer
		idleDeadline                  time.Time
		answers                       bool // it answered at least once
		lastChance                    bool // the hard limit gave a quiet agent KillGrace to exit on _close
	)
	stop := func(t *time.Timer) {
		if t != nil {
			t.Stop()
		}
	}
	defer func() { stop(hardTimer); stop(idleTimer) }()
	startTurn := func() {
		if spec.Timeout > 0 {
			hardTimer = time.NewTimer(spec.Timeout)
			hard = hardTimer.C
		}
		if spec.IdleTimeout > 0 {
			idleTimer = time.NewTimer(spec.IdleTimeout)
			idleDeadline = time.Now().Add(spec.IdleTimeout)
			idle = idleTimer.C
		}
	}
	prompted := spec.Prompted
	if prompted == nil {
		startTurn()
	}
	terminate := func(why string) {
		if l.killed {
			return
		}
		l.killed = true
		l.log.Printf("%s: SIGTERM to process group %d", why, l.pgid)
		syscall.Kill(-l.pgid, syscall.SIGTERM)
		grace = time.After(spec.KillGrace)
	}
	writeClose := func(why string) {
		if l.out.Closed {
			return
		}
		l.out.Closed = true
		l.log.Printf("%s: writing _close", why)
		if err := Close(context.WithoutCancel(ctx), spec.IPCDir, spec.Reporter); err != nil {
			l.log.Printf("writing _close: %v", err)
		}
	}
	resetIdle := func() {
		if idleTimer != nil && !l.out.Closed {
			idleTimer.Reset(spec.IdleTimeout)
			idleDeadline = time.Now().Add(spec.IdleTimeout)
		}
	}
	// closeIdle ends a quiet agent the clean way: _close, then CloseGrace
	// to exit.
	closeIdle := func() {
		if l.out.Closed || l.killed {
			return
		}
		idle = nil
		writeClose(fmt.Sprintf("no output for %s", spec.IdleTimeout))
		closeGrace = time.After(spec.CloseGrace)
	}
	closing := spec.Closing
	ctxDone := ctx.Done()
	for {
		select {
		case <-l.exited:
			return
		case <-prompted:
			prompted = nil
			l.log.Printf("given its first prompt: the turn limits start")
			startTurn()
		case <-l.activity:
			resetIdle()
		case <-l.answered:
			// The timeout bounds one turn: an agent that keeps answering a
			// live conversation is not cut off mid-chat. The idle deadline
			// moves first, so with equal limits it is never the later one.
			answers = true
			resetIdle()
			if hardTimer != nil && !lastChance {
				hardTimer.Reset(spec.Timeout)
				hard = hardTimer.C
			}
		case <-idle:
			closeIdle()
		case <-closing:
			closing = nil
			writeClose("asked to finish")
		case <-closeGrace:
			closeGrace = nil
			l.out.TimedOut = true
			terminate(fmt.Sprintf("still running %s after the idle _close", spec.CloseGrace))
		case <-hard:
			hard = nil
			if answers && !lastChance && !l.killed {
				// The turn ended with an answer and the agent is quiet (with
				// equal limits the idle deadline falls due at this moment):
				// it gets _close and KillGrace to take the clean way out.
				if idleTimer != nil && !time.Now().Before(idleDeadline) {
					closeIdle()
				}
				if l.out.Closed {
					lastChance = true
					hardTimer.Reset(spec.KillGrace)
					hard = hardTimer.C
					continue
				}
			}
			l.out.TimedOut = true
			terminate(fmt.Sprintf("hard timeout %s", spec.Timeout))
		case <-ctxDone:
			ctxDone = nil
			terminate("cancelled")
		case <-grace:
			grace = nil
			l.log.Printf("still running %s after SIGTERM: SIGKILL to process group %d", spec.KillGrace, l.pgid)
			syscall.Kill(-l.pgid, syscall.SIGKILL)
		}
	}
}
