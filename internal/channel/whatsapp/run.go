package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"go.mau.fi/whatsmeow/socket"
	wastore "go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// link is the part of whatsmeow's client the reconnect loop drives.
type link interface {
	ConnectContext(ctx context.Context) error
	Disconnect()
	IsConnected() bool
}

// watchdogInterval is how often the reconnect loop checks that a
// connection it believes up really is: whatsmeow can lose a socket without
// an event (a failed reconnect after a 515 stream error, a socket that
// never logs in), and then nothing else would ever reconnect.
const watchdogInterval = time.Minute

// Run connects and delivers inbound messages to sink until ctx ends (then
// it returns nil) or WhatsApp ends the session: ErrLoggedOut (the store has
// been cleared), ErrStreamReplaced, ErrClientOutdated. Without a paired
// session it logs how to pair and waits for `nanoclawd whatsapp login` to
// write one, then connects: no restart needed. Network
// trouble is never returned: Run reconnects with backoff until ctx ends.
// Run is called once per Channel.
func (c *Channel) Run(ctx context.Context, sink channel.Sink) error {
	container, device, err := openStore(ctx, c.opts.DataDir, c.log)
	if err != nil {
		c.setStatus(stateStopped, err.Error())
		return err
	}
	defer container.Close()
	if device.ID == nil {
		c.setStatus(stateNotPaired, "") // logs how to pair
		if device, err = c.waitForPairing(ctx, container); err != nil || device == nil {
			return err
		}
		c.log.Info().Str("account", device.ID.ToNonAD().String()).Msg("WhatsApp was paired; connecting")
	}

	v, source := useCurrentVersion(ctx, c.opts.DataDir, c.opts.FetchVersion)
	c.log.Info().Str("version", v.String()).Str("source", source).Msg("WhatsApp Web client version")
	cli := newClient(device, c.log)
	cli.EnableAutoReconnect = false // keepConnected reconnects, with backoff and jitter
	// On a 515 stream error whatsmeow would reconnect by itself and, if that
	// fails, tell nobody; instead it sends ManualLoginReconnect and the loop
	// reconnects.
	cli.DisableLoginAutoReconnect = true
	// An undecryptable message is also asked for from the owner's phone.
	cli.AutomaticMessageRerequestFromPhone = true
	// A recipient that cannot decrypt one of our replies asks for it again;
	// whatsmeow keeps what we sent in whatsapp.db so it can answer that
	// also after a restart.
	cli.UseRetryMessageStore = true
	// Acknowledge a message only after handleEvent stored it. whatsmeow
	// keeps the decrypted text in whatsapp.db until then, so when WhatsApp
	// delivers it again (after a sink error or a kill -9) it is handed over
	// again instead of failing to decrypt a second time.
	cli.SynchronousAck = true
	cli.EnableDecryptedEventBuffer = true
	cli.AddEventHandlerWithSuccessStatus(c.handleEvent)
	c.mu.Lock()
	c.client, c.sink, c.ctx, c.lids = cli, sink, ctx, container.LIDMap
	c.own, c.ownLID = device.ID.ToNonAD(), device.LID.ToNonAD()
	c.mu.Unlock()

	syncCtx, stopSync := context.WithCancel(ctx)
	go c.syncGroupsDaily(syncCtx)
	err = c.keepConnected(ctx, cli)
	stopSync()
	c.connected.Store(false)

	if errors.Is(err, ErrLoggedOut) {
		c.setStatus(stateLoggedOut, err.Error())
		container.Close()
		if cerr := clearStore(c.opts.DataDir); cerr != nil {
			c.log.Error().Err(cerr).Msg("could not delete the WhatsApp session files; delete them by hand before pairing again")
		}
		c.log.Error().Msg(err.Error())
		return err
	}
	if err != nil {
		c.log.Error().Msg(err.Error())
		return err
	}
	c.setStatus(stateStopped, "shut down")
	return nil
}

// pairingPoll is how often an unpaired daemon looks for a pairing made by
// `nanoclawd whatsapp login` (a separate process writing whatsapp.db).
const pairingPoll = 2 * time.Second

// waitForPairing returns the device once the store holds a paired one, or
// nil when ctx ends first.
func (c *Channel) waitForPairing(ctx context.Context, container *sqlstore.Container) (*wastore.Device, error) {
	for {
		select {
		case <-ctx.Done():
			c.setStatus(stateStopped, "shut down")
			return nil, nil
		case <-c.clock.After(pairingPoll):
		}
		device, err := container.GetFirstDevice(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil
			}
			c.log.Warn().Err(err).Msg("looking for a new WhatsApp pairing")
			continue
		}
		if device.ID != nil {
			return device, nil
		}
	}
}

// keepConnected connects, waits until the connection drops, waits out the
// backoff and connects again, until ctx ends (nil) or the handler reports
// that reconnecting cannot help (that error).
//
// When WhatsApp calls the client version outdated (405), the current version
// is fetched again and the loop reconnects once at once, before giving up.
func (c *Channel) keepConnected(ctx context.Context, l link) error {
	attempt := 0
	refetched := false
	for {
		// Signals left over from the previous connection mean nothing now.
		drain(c.dropped)
		drain(c.up)
		if c.state() != stateDisconnected { // during an outage, "disconnected since" keeps its start
			c.setStatus(stateConnecting, "")
		}
		var wait time.Duration
		err := l.ConnectContext(withWhatsmeowLog(ctx, c.log))
		switch {
		case ctx.Err() != nil:
			l.Disconnect()
			return nil
		case errors.Is(err, wastore.ErrDeviceDeleted):
			return ErrLoggedOut
		case err != nil:
			c.setStatus(stateDisconnected, describeConnectError(err).Error())
		default:
			err := c.watch(ctx, l)
			l.Disconnect()
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, ErrClientOutdated) && !refetched:
				refetched = true
				v, source := useCurrentVersion(ctx, c.opts.DataDir, c.opts.FetchVersion)
				c.log.Warn().Str("version", v.String()).Str("source", source).
					Msg("WhatsApp says this client version is outdated; reconnecting once with the current one")
				continue
			case err != nil:
				return err
			}
			wait = c.lastWait
			select {
			case <-c.up: // it had logged in: this is a new outage, start the backoff over
				attempt = 0
			default:
			}
		}
		d := max(c.backoff.Delay(attempt, c.jitter()), wait)
		attempt++
		c.retryAt.Store(c.clock.Now().Add(d).UnixNano())
		c.log.Info().Dur("in", d).Int("attempt", attempt).Msg("reconnecting to WhatsApp")
		select {
		case <-ctx.Done():
			return nil
		case err := <-c.terminal:
			return err
		case <-c.clock.After(d):
		}
	}
}

// watch waits while connected: until ctx ends (nil), the handler reports a
// terminal error (returned) or a drop (nil, with c.lastWait set), or the
// watchdog finds the socket gone or never logged in (nil).
func (c *Channel) watch(ctx context.Context, l link) error {
	c.lastWait = 0
	idle := 0 // watchdog ticks without a logged-in connection
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-c.terminal:
			return err
		case c.lastWait = <-c.dropped:
			return nil
		case <-c.clock.After(watchdogInterval):
			switch {
			case !l.IsConnected():
				c.lost("the connection was lost without notice (found by the watchdog)", 0)
			case !c.connected.Load():
				if idle++; idle < 2 {
					continue
				}
				c.lost("connected but not logged in after "+(2*watchdogInterval).String()+" (found by the watchdog)", 0)
			default:
				idle = 0
				continue
			}
			drain(c.dropped)
			return nil
		}
	}
}

func drain[T any](ch chan T) {
	select {
	case <-ch:
	default:
	}
}

// describeConnectError turns a failed websocket dial into one of the
// sentinel errors a person can act on.
func describeConnectError(err error) error {
	var status socket.ErrWithStatusCode
	switch {
	case errors.As(err, &status) && status.StatusCode == 429:
		return fmt.Errorf("%w (HTTP 429)", ErrRateLimited)
	case errors.As(err, &status):
		return fmt.Errorf("WhatsApp refused the connection with HTTP %d: try again later; if it persists, update nanoclawd", status.StatusCode)
	case errors.Is(err, socket.ErrDialFailed), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %s", ErrNoNetwork, netCause(err))
	}
	return fmt.Errorf("connect to WhatsApp: %w", err)
}

// netCause is the innermost network error, which says what actually
// failed (lookup, connect, TLS) without the layers of wrapping above it.
func netCause(err error) string {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "lookup " + dnsErr.Name + ": " + dnsErr.Err
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return opErr.Error()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", dialTimeout)
	}
	return err.Error()
}
