package selftest

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// Verdict is the outcome of the daemon's start-time test, which confined
// runs wait for (router.Router.Proof): until it is in, Wait blocks; after,
// it returns nil if the sandbox held, else why not, for every run.
type Verdict struct {
	once sync.Once
	done chan struct{}
	err  error
}

// NewVerdict is a verdict not yet in.
func NewVerdict() *Verdict { return &Verdict{done: make(chan struct{})} }

// Set records the verdict; only the first call counts.
func (v *Verdict) Set(err error) {
	v.once.Do(func() {
		v.err = err
		close(v.done)
	})
}

// Wait returns the verdict once it is in, or ctx's error.
func (v *Verdict) Wait(ctx context.Context) error {
	select {
	case <-v.done:
		return v.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Refusal is the verdict on a report: an error naming each broken
// boundary, or nil.
func Refusal(rep Report) error {
	broken := rep.Broken(nil)
	if len(broken) == 0 {
		return nil
	}
	var parts []string
	for _, b := range broken {
		parts = append(parts, b.Boundary+" ("+b.Detail+")")
	}
	return fmt.Errorf("the sandbox does not hold on this machine: %s broken; confined groups get no agent until 'nanoclawd security test' passes",
		strings.Join(parts, "; "))
}

// Peek tells, without waiting, whether the verdict is in and what it is.
func (v *Verdict) Peek() (in bool, err error) {
	select {
	case <-v.done:
		return true, v.err
	default:
		return false, nil
	}
}
