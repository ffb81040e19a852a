package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	wastore "go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types/events"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Min: time.Second, Max: 5 * time.Minute}
	for _, tc := range []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{0, 0, 500 * time.Millisecond},
		{0, 0.5, 750 * time.Millisecond},
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{3, 0.5, 6 * time.Second},
		{8, 0, 128 * time.Second},
		{9, 0, 150 * time.Second}, // 256 s is capped at 300 s, then halved
		{9, 0.5, 225 * time.Second},
		{1000, 0, 150 * time.Second}, // no overflow however long the outage
	} {
		if got := b.Delay(tc.n, tc.r); got != tc.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tc.n, tc.r, got, tc.want)
		}
	}
	// Whatever the jitter, the wait stays within [d/2, d) of the capped doubling.
	for n := range 40 {
		for _, r := range []float64{0, 0.25, 0.999999} {
			d := b.Delay(n, r)
			if d < b.Min/2 || d >= b.Max {
				t.Errorf("Delay(%d, %v) = %v, outside [%v, %v)", n, r, d, b.Min/2, b.Max)
			}
		}
	}
}

// fakeClock hands every requested wait to the test, which fires it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers chan fakeTimer
}

type fakeTimer struct {
	d    time.Duration
	fire chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), timers: make(chan fakeTimer, 16)}
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// fire advances the time by the timer's wait and fires it.
func (f *fakeClock) fire(tm fakeTimer) {
	f.mu.Lock()
	f.now = f.now.Add(tm.d)
	now := f.now
	f.mu.Unlock()
	tm.fire <- now
}
func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	t := fakeTimer{d: d, fire: make(chan time.Time, 1)}
	f.timers <- t
	return t.fire
}

// next returns the next wait the code under test started, other than the
// daily group sync.
func (f *fakeClock) next(t *testing.T) fakeTimer {
	t.Helper()
	for {
		tm := recv(t, f.timers)
		if tm.d != groupSyncInterval && tm.d != watchdogInterval {
			return tm
		}
	}
}

// fakeLink plays a script of ConnectContext results.
type fakeLink struct {
	results     chan error
	connects    chan struct{}
	disconnects chan struct{}
	gone        atomic.Bool // the socket died without an event
}

func newFakeLink() *fakeLink {
	return &fakeLink{results: make(chan error, 16), connects: make(chan struct{}, 16), disconnects: make(chan struct{}, 16)}
}

func (l *fakeLink) ConnectContext(ctx context.Context) error {
	l.connects <- struct{}{}
	return <-l.results
}

func (l *fakeLink) Disconnect() { l.disconnects <- struct{}{} }

func (l *fakeLink) IsConnected() bool { return !l.gone.Load() }

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("nothing arrived on %T within 10s", ch)
		panic("unreachable")
	}
}

var errDial = fmt.Errorf("dial: %w", errors.New("no route"))

// The reconnect loop, driven through the handler by whatsmeow's real
// connection events: growing waits while connects fail, back to the
// shortest wait after a connection that had logged in dropped, a temporary
// ban waited out in full, and a logout ends it.
func TestKeepConnectedBacksOffAndStops(t *testing.T) {
	clock := newFakeClock()
	c := New(Options{AssistantName: "Andy", Clock: clock})
	c.jitter = func() float64 { return 0 }
	l := newFakeLink()
	done := make(chan error, 1)
	go func() { done <- c.keepConnected(context.Background(), l) }()

	wantWait := func(want time.Duration) fakeTimer {
		t.Helper()
		tm := clock.next(t)
		if tm.d != want {
			t.Fatalf("waited %v before reconnecting, want %v", tm.d, want)
		}
		return tm
	}

	// Three failed dials: 0.5 s, 1 s, 2 s. The status keeps the time the
	// outage began.
	var first string
	for _, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
		recv(t, l.connects)
		l.results <- errDial
		tm := wantWait(want)
		if next := c.NextRetry(); !next.Equal(clock.Now().Add(want)) {
			t.Errorf("NextRetry = %v, want now + %v", next, want)
		}
		if first == "" {
			first = c.Status()
		}
		clock.fire(tm)
	}
	if s := c.Status(); s != first || !contains(s, "disconnected since 2026-11-21T10:00:00Z") {
		t.Errorf("status after failed dials = %q, after the first = %q", s, first)
	}

	// Connected and logged in, then the socket drops: the backoff starts over.
	recv(t, l.connects)
	l.results <- nil
	c.handleEvent(&events.Connected{})
	if !c.connected.Load() {
		t.Fatal("not marked connected after events.Connected")
	}
	c.handleEvent(&events.Disconnected{})
	if c.connected.Load() {
		t.Fatal("still marked connected after events.Disconnected")
	}
	clock.fire(wantWait(500 * time.Millisecond))

	// A temporary ban is waited out, not hammered.
	recv(t, l.connects)
	l.results <- nil
	c.handleEvent(&events.TemporaryBan{Code: events.TempBanSentToTooManyPeople, Expire: time.Hour})
	clock.fire(wantWait(time.Hour))

	// Logged out: no more reconnects.
	recv(t, l.connects)
	l.results <- nil
	c.handleEvent(&events.LoggedOut{OnConnect: true, Reason: events.ConnectFailureLoggedOut})
	if err := recv(t, done); !errors.Is(err, ErrLoggedOut) {
		t.Fatalf("keepConnected = %v, want ErrLoggedOut", err)
	}
	if s := c.Status(); !contains(s, "stopped") || !contains(s, "nanoclawd whatsapp login") {
		t.Errorf("status after logout = %q", s)
	}
}

func TestKeepConnectedTerminalEvents(t *testing.T) {
	for _, tc := range []struct {
		evt  any
		want error
	}{
		{&events.StreamReplaced{}, ErrStreamReplaced},
		{&events.LoggedOut{Reason: events.ConnectFailureMainDeviceGone}, ErrLoggedOut},
	} {
		t.Run(fmt.Sprintf("%T", tc.evt), func(t *testing.T) {
			c := New(Options{Clock: newFakeClock()})
			l := newFakeLink()
			done := make(chan error, 1)
			go func() { done <- c.keepConnected(context.Background(), l) }()
			recv(t, l.connects)
			l.results <- nil
			c.handleEvent(tc.evt)
			if err := recv(t, done); !errors.Is(err, tc.want) {
				t.Fatalf("keepConnected = %v, want %v", err, tc.want)
			}
			recv(t, l.disconnects)
		})
	}
}

// A 405 "client outdated" makes the loop fetch the current version and
// reconnect once, at once; a second 405 ends it.
func TestKeepConnectedRefetchesVersionOnceOn405(t *testing.T) {
	clock := newFakeClock()
	fetched := make(chan struct{}, 4)
	c := New(Options{Clock: clock, FetchVersion: func(context.Context) (wastore.WAVersionContainer, error) {
		fetched <- struct{}{}
		return wastore.WAVersionContainer{}, errors.New("offline")
	}})
	l := newFakeLink()
	done := make(chan error, 1)
	go func() { done <- c.keepConnected(context.Background(), l) }()
	recv(t, l.connects)
	l.results <- nil
	c.handleEvent(&events.ClientOutdated{})
	recv(t, l.disconnects)
	recv(t, fetched)
	recv(t, l.connects) // at once: no backoff timer was needed
	l.results <- nil
	c.handleEvent(&events.ClientOutdated{})
	if err := recv(t, done); !errors.Is(err, ErrClientOutdated) {
		t.Fatalf("keepConnected after a second 405 = %v, want ErrClientOutdated", err)
	}
	if len(fetched) != 0 {
		t.Error("the version was fetched more than once")
	}
}

// watchdog returns the next watchdog tick the loop started.
func (f *fakeClock) watchdog(t *testing.T) fakeTimer {
	t.Helper()
	for {
		if tm := recv(t, f.timers); tm.d == watchdogInterval {
			return tm
		}
	}
}

// The watchdog reconnects when the socket died without an event, and when
// a connection never logs in; while all is well it does nothing.
func TestKeepConnectedWatchdog(t *testing.T) {
	clock := newFakeClock()
	c := New(Options{Clock: clock})
	c.jitter = func() float64 { return 0 }
	l := newFakeLink()
	go c.keepConnected(t.Context(), l)

	recv(t, l.connects)
	l.results <- nil
	c.handleEvent(&events.Connected{})
	clock.fire(clock.watchdog(t)) // healthy: keeps watching, with a new tick
	tick := clock.watchdog(t)
	l.gone.Store(true)
	clock.fire(tick)
	recv(t, l.disconnects)
	if s := c.Status(); !contains(s, "watchdog") {
		t.Errorf("status = %q, want the watchdog named", s)
	}
	clock.fire(clock.next(t)) // the backoff wait
	l.gone.Store(false)

	// Connected socket, but no login: the second tick gives up on it.
	recv(t, l.connects)
	l.results <- nil
	clock.fire(clock.watchdog(t))
	select {
	case <-l.disconnects:
		t.Fatal("disconnected after one tick without login")
	default:
	}
	clock.fire(clock.watchdog(t))
	recv(t, l.disconnects)
	if s := c.Status(); !contains(s, "not logged in") {
		t.Errorf("status = %q", s)
	}
}

// A 515 stream error with whatsmeow's own reconnect disabled arrives as
// ManualLoginReconnect; the loop reconnects.
func TestKeepConnectedManualLoginReconnect(t *testing.T) {
	clock := newFakeClock()
	c := New(Options{Clock: clock})
	l := newFakeLink()
	go c.keepConnected(t.Context(), l)
	recv(t, l.connects)
	l.results <- nil
	c.handleEvent(&events.Connected{})
	c.handleEvent(&events.ManualLoginReconnect{})
	recv(t, l.disconnects)
	clock.fire(clock.next(t))
	recv(t, l.connects)
	l.results <- errDial
}

func TestKeepConnectedDeletedDeviceIsLoggedOut(t *testing.T) {
	c := New(Options{Clock: newFakeClock()})
	l := newFakeLink()
	l.results <- wastore.ErrDeviceDeleted
	if err := c.keepConnected(context.Background(), l); !errors.Is(err, ErrLoggedOut) {
		t.Fatalf("keepConnected = %v, want ErrLoggedOut", err)
	}
}

func TestKeepConnectedStopsWithContext(t *testing.T) {
	clock := newFakeClock()
	c := New(Options{Clock: clock})
	l := newFakeLink()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.keepConnected(ctx, l) }()
	recv(t, l.connects)
	l.results <- errDial
	clock.next(t) // waiting to reconnect
	cancel()
	if err := recv(t, done); err != nil {
		t.Fatalf("keepConnected after cancel = %v, want nil", err)
	}
}
