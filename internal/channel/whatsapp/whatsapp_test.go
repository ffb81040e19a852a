package whatsapp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/socket"
	wastore "go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

func TestOwns(t *testing.T) {
	c := New(Options{})
	for jid, want := range map[string]bool{
		"491701234567@s.whatsapp.net":   true,
		"120363000000000001@g.us":       true,
		"90000000000001@lid":            true,
		"local:family":                  false,
		"status@broadcast":              false,
		"120363000000000009@newsletter": false,
		"@s.whatsapp.net":               false,
		"":                              false,
	} {
		if got := c.Owns(jid); got != want {
			t.Errorf("Owns(%q) = %v, want %v", jid, got, want)
		}
	}
}

func TestMessageIDStable(t *testing.T) {
	a, b := MessageID("row-1"), MessageID("row-1")
	if a != b {
		t.Fatalf("same outbox id gave %s and %s", a, b)
	}
	if MessageID("row-2") == a {
		t.Fatal("different outbox ids gave the same message id")
	}
	if !strings.HasPrefix(string(a), "3EB0") || len(a) != 22 || strings.ToUpper(string(a)) != string(a) {
		t.Errorf("message id %q is not shaped like a WhatsApp Web id", a)
	}
}

func TestOutgoingText(t *testing.T) {
	shared := New(Options{AssistantName: "Andy"})
	own := New(Options{AssistantName: "Andy", OwnNumber: true})
	for _, tc := range []struct {
		c        *Channel
		in, want string
	}{
		{shared, "hello", "Andy: hello"},
		{shared, "Andy: already", "Andy: already"},
		{own, "hello", "hello"},
	} {
		if got := tc.c.outgoingText(tc.in); got != tc.want {
			t.Errorf("outgoingText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// Sending while disconnected fails (the outbox keeps the message); a chat id
// that is not WhatsApp's fails with a message that says what is wrong.
func TestSendWhileDisconnected(t *testing.T) {
	c := New(Options{AssistantName: "Andy"})
	ctx := context.Background()
	err := c.Send(ctx, channel.Outgoing{ID: "1", ChatJID: "120363000000000001@g.us", Text: "hi"})
	if !errors.Is(err, ErrNotConnected) {
		t.Errorf("Send while disconnected = %v, want ErrNotConnected", err)
	}
	if err := c.SetTyping(ctx, "120363000000000001@g.us", true); !errors.Is(err, ErrNotConnected) {
		t.Errorf("SetTyping while disconnected = %v, want ErrNotConnected", err)
	}
	if err := c.Send(ctx, channel.Outgoing{ID: "1", ChatJID: "family", Text: "hi"}); err == nil || !strings.Contains(err.Error(), "not a WhatsApp chat id") {
		t.Errorf("Send to a bad jid = %v", err)
	}
	if c.Connected() {
		t.Error("Connected() before Run")
	}
}

// Not paired: Run says how to pair (log, in-process status and the status
// file `nanoclawd doctor` reads), waits, and goes on to connect as soon as
// `whatsapp login` (another process) has written a pairing.
func TestRunWaitsForPairing(t *testing.T) {
	dir := t.TempDir()
	var logs e2e.Buffer // the daemon's logger writes while the test reads
	clock := newFakeClock()
	c := New(Options{DataDir: dir, AssistantName: "Andy", Logger: zerolog.New(&logs), Clock: clock,
		FetchVersion: func(context.Context) (wastore.WAVersionContainer, error) {
			return wastore.WAVersionContainer{}, errors.New("offline")
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, &fakeSink{}) }()

	poll := recv(t, clock.timers)
	if poll.d != pairingPoll {
		t.Fatalf("first wait %v, want the pairing poll", poll.d)
	}
	if !strings.Contains(logs.String(), "nanoclawd whatsapp login") {
		t.Errorf("log does not tell the operator how to pair:\n%s", logs.String())
	}
	if s := c.Status(); !strings.HasPrefix(s, "not paired") {
		t.Errorf("Status() = %q", s)
	}
	line, pid, err := ReadStatus(dir)
	if err != nil || line != c.Status() || pid != os.Getpid() {
		t.Errorf("ReadStatus = %q, %d, %v", line, pid, err)
	}
	if _, err := Paired(context.Background(), dir); !errors.Is(err, ErrNotPaired) {
		t.Errorf("Paired = %v, want ErrNotPaired", err)
	}
	clock.fire(poll) // still nothing: it keeps waiting
	poll = recv(t, clock.timers)

	fakePair(t, dir)
	clock.fire(poll)
	// Paired: Run starts its daily group sync and connects.
	for tm := recv(t, clock.timers); tm.d != groupSyncInterval; tm = recv(t, clock.timers) {
	}
	if !strings.Contains(logs.String(), "WhatsApp was paired; connecting") {
		t.Errorf("log lacks the pairing being picked up:\n%s", logs.String())
	}
	cancel()
	if err := recv(t, done); err != nil {
		t.Errorf("Run after cancel = %v", err)
	}
}

// fakePair stores a device with a JID, as pairing would, so Run and Login
// see a paired store. The keys are real, the account is not.
func fakePair(t *testing.T, dir string) types.JID {
	t.Helper()
	ctx := context.Background()
	container, device, err := openStore(ctx, dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer container.Close()
	id := types.NewADJID("491700000001", 0, 7)
	device.ID = &id
	device.Account = &waAdv.ADVSignedDeviceIdentity{Details: []byte{1}, AccountSignature: make([]byte, 64), AccountSignatureKey: make([]byte, 32), DeviceSignature: make([]byte, 64)}
	device.LID = types.NewADJID("90000000000001", 0, 7)
	device.LID.Server = types.HiddenUserServer
	if err := device.Save(ctx); err != nil {
		t.Fatal(err)
	}
	return id.ToNonAD()
}

func offline(t *testing.T) {
	t.Helper()
	if _, err := net.LookupHost("web.whatsapp.com"); err == nil {
		t.Skip("web.whatsapp.com resolves here; this test needs a machine without a route to WhatsApp")
	}
}

// With no route to WhatsApp, Login fails within seconds with a line that
// says so, instead of waiting out its timeout.
func TestLoginNoNetwork(t *testing.T) {
	offline(t)
	var out bytes.Buffer
	start := time.Now()
	_, err := Login(context.Background(), LoginOptions{DataDir: t.TempDir(), Out: &out, Timeout: 10 * time.Minute})
	if !errors.Is(err, ErrNoNetwork) {
		t.Fatalf("Login = %v, want ErrNoNetwork", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "web.whatsapp.com") {
		t.Errorf("error is not one clear line: %q", msg)
	}
	t.Logf("failed after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

func TestLoginBadPhoneBeforeNetwork(t *testing.T) {
	dir := t.TempDir()
	for _, phone := range []string{"0170 1234567", "12345", "+49 170 abc", "1234567890123456"} {
		_, err := Login(context.Background(), LoginOptions{DataDir: dir, Phone: phone})
		if !errors.Is(err, ErrBadPhone) {
			t.Errorf("Login(--phone %q) = %v, want ErrBadPhone", phone, err)
		}
	}
	if got, err := normalizePhone("+49 (170) 123-4567"); err != nil || got != "491701234567" {
		t.Errorf("normalizePhone = %q, %v", got, err)
	}
}

func TestLoginAlreadyPaired(t *testing.T) {
	dir := t.TempDir()
	want := fakePair(t, dir)
	own, err := Login(context.Background(), LoginOptions{DataDir: dir})
	if !errors.Is(err, ErrAlreadyPaired) || own != want {
		t.Fatalf("Login = %s, %v; want %s, ErrAlreadyPaired", own, err, want)
	}
	if got, err := Paired(context.Background(), dir); err != nil || got != want {
		t.Errorf("Paired = %s, %v", got, err)
	}
}

// Paired but no route: Run does not fail, it keeps retrying with backoff
// (so the daemon keeps serving everything else) and says why in Status,
// and it stops cleanly when its context ends.
func TestRunOfflineKeepsRetrying(t *testing.T) {
	offline(t)
	dir := t.TempDir()
	fakePair(t, dir)
	clock := newFakeClock()
	c := New(Options{DataDir: dir, AssistantName: "Andy", Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, &fakeSink{}) }()

	clock.next(t) // the first connect failed; Run waits to retry
	if s := c.Status(); !strings.Contains(s, "disconnected") || !strings.Contains(s, "cannot reach WhatsApp") {
		t.Errorf("Status() = %q", s)
	}
	if c.Connected() {
		t.Error("Connected() while offline")
	}
	cancel()
	if err := recv(t, done); err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	if s := c.Status(); !strings.HasPrefix(s, "stopped") {
		t.Errorf("Status() after shutdown = %q", s)
	}
}

// Logged out while running: Run returns ErrLoggedOut, the session files are
// gone, and the next start says "not paired" instead of looping.
func TestRunLoggedOutClearsStore(t *testing.T) {
	offline(t)
	dir := t.TempDir()
	fakePair(t, dir)
	clock := newFakeClock()
	var logs bytes.Buffer
	c := New(Options{DataDir: dir, AssistantName: "Andy", Clock: clock, Logger: zerolog.New(&logs)})
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background(), &fakeSink{}) }()
	clock.next(t)
	c.handleEvent(&events.LoggedOut{OnConnect: true, Reason: events.ConnectFailureLoggedOut})
	if err := recv(t, done); !errors.Is(err, ErrLoggedOut) {
		t.Fatalf("Run = %v, want ErrLoggedOut", err)
	}
	if !strings.Contains(logs.String(), "nanoclawd whatsapp login") {
		t.Errorf("no clear log line:\n%s", logs.String())
	}
	// alerts.fallback takes over from here (the daemon asks Outage).
	if since, loggedOut := c.Outage(); since.IsZero() || !loggedOut {
		t.Errorf("Outage() = %v, %v after a logout, want a time and true", since, loggedOut)
	}
	if _, err := os.Stat(StoreFile(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("session store still there: %v", err)
	}
	next := New(Options{DataDir: dir, Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- next.Run(ctx, &fakeSink{}) }()
	for tm := recv(t, clock.timers); tm.d != pairingPoll; tm = recv(t, clock.timers) {
	}
	if s := next.Status(); !strings.HasPrefix(s, "not paired") {
		t.Errorf("next start: Status() = %q, want not paired", s)
	}
	cancel()
	if err := recv(t, done); err != nil {
		t.Errorf("next Run after cancel = %v", err)
	}
}

func TestDescribeErrors(t *testing.T) {
	dns := &net.DNSError{Err: "no such host", Name: "web.whatsapp.com", IsNotFound: true}
	for _, tc := range []struct {
		err  error
		want error
		text string
	}{
		{fmt.Errorf("%w: %w", socket.ErrDialFailed, dns), ErrNoNetwork, "lookup web.whatsapp.com: no such host"},
		{fmt.Errorf("%w: %w", socket.ErrDialFailed, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: network is unreachable")}), ErrNoNetwork, "network is unreachable"},
		{fmt.Errorf("%w: %w", socket.ErrDialFailed, context.DeadlineExceeded), ErrNoNetwork, "no answer within"},
		{fmt.Errorf("%w: %w", socket.ErrDialFailed, socket.ErrWithStatusCode{StatusCode: 429}), ErrRateLimited, "429"},
	} {
		got := describeConnectError(tc.err)
		if !errors.Is(got, tc.want) || !strings.Contains(got.Error(), tc.text) {
			t.Errorf("describeConnectError(%v) = %v, want %v mentioning %q", tc.err, got, tc.want, tc.text)
		}
	}
	got := describeConnectError(fmt.Errorf("%w: %w", socket.ErrDialFailed, socket.ErrWithStatusCode{StatusCode: 403}))
	if !strings.Contains(got.Error(), "HTTP 403") {
		t.Errorf("403: %v", got)
	}
	if err := describePairError(fmt.Errorf("pair: %w", whatsmeow.ErrIQRateOverLimit)); !errors.Is(err, ErrRateLimited) {
		t.Errorf("describePairError(429) = %v", err)
	}
	if err := describePairError(whatsmeow.ErrPhoneNumberIsNotInternational); !errors.Is(err, ErrBadPhone) {
		t.Errorf("describePairError(not international) = %v", err)
	}
}
