package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"
)

// typingRefresh is how often "typing…" is sent again while an agent works:
// WhatsApp clears the indicator by itself after about 25 seconds.
const typingRefresh = 10 * time.Second

// typingMax ends a refresh whose "done" never came (a lost run), so a chat
// does not show the assistant typing for ever.
const typingMax = time.Hour

// presenceSender is the part of whatsmeow's client presence uses.
type presenceSender interface {
	SendPresence(ctx context.Context, state types.Presence) error
	SendChatPresence(ctx context.Context, jid types.JID, state types.ChatPresence, media types.ChatPresenceMedia) error
}

// announceUnavailable marks the account "unavailable" once connected:
// WhatsApp then shows our name to others and delivers chat states, while
// the owner's phone keeps its notifications (an "available" companion
// device would silence them). It needs the push name, which WhatsApp sends
// after pairing; without one it is tried again when that arrives.
func (c *Channel) announceUnavailable(ctx context.Context, p presenceSender) {
	err := p.SendPresence(ctx, types.PresenceUnavailable)
	switch {
	case errors.Is(err, whatsmeow.ErrNoPushName):
		c.log.Debug().Msg("presence not sent yet: WhatsApp has not told us our push name")
	case err != nil:
		c.log.Warn().Err(err).Msg("could not send presence; others may not see typing")
	}
}

// SetTyping implements channel.Channel. On shows "typing…" and keeps it up
// (refreshed every typingRefresh) until SetTyping(off), which sends
// "paused", or typingMax.
func (c *Channel) SetTyping(ctx context.Context, jid string, on bool) error {
	to, err := parseJID(jid)
	if err != nil {
		return err
	}
	cli := c.currentClient()
	if cli == nil || !c.Connected() {
		c.stopTyping(to)
		return fmt.Errorf("typing in %s: %w", jid, ErrNotConnected)
	}
	return c.setTyping(ctx, cli, to, on)
}

func (c *Channel) setTyping(ctx context.Context, p presenceSender, to types.JID, on bool) error {
	c.stopTyping(to)
	state := types.ChatPresencePaused
	if on {
		state = types.ChatPresenceComposing
	}
	if err := p.SendChatPresence(ctx, to, state, types.ChatPresenceMediaText); err != nil {
		return fmt.Errorf("typing in %s: %w", to, err)
	}
	if on {
		stop := make(chan struct{})
		c.typingMu.Lock()
		c.typing[to] = stop
		c.typingMu.Unlock()
		go c.keepTyping(p, to, stop)
	}
	return nil
}

// stopTyping ends the refresh for to, if one runs.
func (c *Channel) stopTyping(to types.JID) {
	c.typingMu.Lock()
	defer c.typingMu.Unlock()
	if stop, ok := c.typing[to]; ok {
		close(stop)
		delete(c.typing, to)
	}
}

// keepTyping sends "composing" to again every typingRefresh until stop
// closes, Run ends, or typingMax passes (then it sends "paused").
func (c *Channel) keepTyping(p presenceSender, to types.JID, stop chan struct{}) {
	runCtx, _ := c.sinkContext()
	end := c.clock.Now().Add(typingMax)
	for {
		select {
		case <-stop:
			return
		case <-runCtx.Done():
			return
		case <-c.clock.After(typingRefresh):
		}
		state := types.ChatPresenceComposing
		if !c.clock.Now().Before(end) {
			state = types.ChatPresencePaused
		}
		if c.connected.Load() {
			if err := p.SendChatPresence(runCtx, to, state, types.ChatPresenceMediaText); err != nil {
				c.log.Debug().Err(err).Str("chat", to.String()).Msg("refresh typing")
			}
		}
		if state == types.ChatPresencePaused {
			c.typingMu.Lock()
			if c.typing[to] == stop {
				delete(c.typing, to)
			}
			c.typingMu.Unlock()
			return
		}
	}
}
