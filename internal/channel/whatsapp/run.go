package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"go.mau.fi/whatsmeow/socket"
	wastore "go.mau.fi/whatsmeow/store"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// link is the part of whatsmeow's client the reconnect loop drives.
type link interface {
	ConnectContext(ctx context.Context) error
	Disconnect()
}

// Run connects and delivers inbound messages to sink until ctx ends (then
// it returns nil) or WhatsApp ends the session: ErrLoggedOut (the store has
// been cleared), ErrStreamReplaced, ErrClientOutdated. Without a paired
// session it logs how to pair and returns ErrNotPaired at once. Network
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
		c.setStatus(stateNotPaired, "")
		c.log.Warn().Msg("WhatsApp is not paired, so nanoclawd runs without it: run `nanoclawd whatsapp login`, then restart the daemon")
		return ErrNotPaired
	}

	cli := newClient(device, c.log)
	cli.EnableAutoReconnect = false // keepConnected reconnects, with backoff and jitter
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

// keepConnected connects, waits until the connection drops, waits out the
// backoff and connects again, until ctx ends (nil) or the handler reports
// that reconnecting cannot help (that error).
func (c *Channel) keepConnected(ctx context.Context, l link) error {
	attempt := 0
	for {
		// Signals left over from the previous connection mean nothing now.
		drain(c.dropped)
		drain(c.up)
		if c.state() != stateDisconnected { // during an outage, "disconnected since" keeps its start
			c.setStatus(stateConnecting, "")
		}
		var wait time.Duration
		err := l.ConnectContext(ctx)
		switch {
		case ctx.Err() != nil:
			l.Disconnect()
			return nil
		case errors.Is(err, wastore.ErrDeviceDeleted):
			return ErrLoggedOut
		case err != nil:
			c.setStatus(stateDisconnected, describeConnectError(err).Error())
		default:
			select {
			case <-ctx.Done():
				l.Disconnect()
				return nil
			case err := <-c.terminal:
				l.Disconnect()
				return err
			case wait = <-c.dropped:
				l.Disconnect()
			}
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
