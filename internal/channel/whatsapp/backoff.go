package whatsapp

import (
	"time"
)

// Clock is the time source of the reconnect loop and the daily group sync,
// so tests can drive them without sleeping.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Backoff is the reconnect policy: the wait doubles from Min up to Max, and
// jitter spreads it over [d/2, d) so that many clients cut off by the same
// outage do not all come back in the same second.
type Backoff struct {
	Min, Max time.Duration
}

// DefaultBackoff waits 1 s after the first failure and never more than
// 5 minutes: fast enough after a blip, gentle during a long outage.
var DefaultBackoff = Backoff{Min: time.Second, Max: 5 * time.Minute}

// Delay is the wait before reconnect attempt n (0 = first retry). r, in
// [0, 1), picks the point in the jitter range; passing it in keeps Delay a
// pure function.
func (b Backoff) Delay(n int, r float64) time.Duration {
	d := b.Min
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	half := d / 2
	return half + time.Duration(r*float64(d-half))
}
