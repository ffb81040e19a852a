// Package whatsapp is the WhatsApp channel: it links nanoclawd to the
// owner's WhatsApp account as a companion device (whatsmeow), turns incoming
// messages into channel.Messages, sends replies, shows typing, and keeps the
// connection up with backoff until WhatsApp says the session is over.
package whatsapp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"google.golang.org/protobuf/proto"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// Sentinel errors. Run returns the first four; the daemon tells them apart
// to decide whether to restart WhatsApp, keep running without it, or exit.
var (
	// ErrNotPaired: no session in <dataDir>/whatsapp.db; run `nanoclawd whatsapp login`.
	ErrNotPaired = errors.New("WhatsApp is not paired: run `nanoclawd whatsapp login`")
	// ErrLoggedOut: the phone (or WhatsApp) unlinked this device. The
	// session has been deleted; reconnecting cannot help.
	ErrLoggedOut = errors.New("WhatsApp logged this device out and its session was deleted: run `nanoclawd whatsapp login` to pair again")
	// ErrStreamReplaced: another process connected with the same session.
	ErrStreamReplaced = errors.New("another program connected to WhatsApp with this session (is a second nanoclawd running on the same dataDir?); stopped WhatsApp here so the two do not keep kicking each other off")
	// ErrClientOutdated: WhatsApp refuses this client version.
	ErrClientOutdated = errors.New("WhatsApp rejected this client version as outdated, also after fetching the current version from web.whatsapp.com: update nanoclawd (it pins the whatsmeow library)")
	// ErrNotConnected: Send or SetTyping while the connection is down; the
	// outbox keeps the message and retries.
	ErrNotConnected = errors.New("WhatsApp is not connected")
	// ErrNoNetwork: WhatsApp's servers cannot be reached at all.
	ErrNoNetwork = errors.New("cannot reach WhatsApp (web.whatsapp.com): check the network, DNS or HTTPS_PROXY")
	// ErrRateLimited: WhatsApp asks us to slow down (HTTP/IQ 429).
	ErrRateLimited = errors.New("WhatsApp is rate-limiting this client: wait a few minutes before trying again")
	// ErrLoginTimeout: nobody scanned the QR code or entered the pairing code in time.
	ErrLoginTimeout = errors.New("WhatsApp login timed out before the code was used: run `nanoclawd whatsapp login` again")
	// ErrAlreadyPaired: Login found an existing session.
	ErrAlreadyPaired = errors.New("WhatsApp is already paired")
)

// Options configures a Channel.
type Options struct {
	DataDir       string         // whatsmeow's store is <DataDir>/whatsapp.db
	AssistantName string         // replies start with "<AssistantName>: " unless OwnNumber
	OwnNumber     bool           // the assistant has a WhatsApp number of its own
	Logger        zerolog.Logger // whatsmeow's logs go here too, with a "sublogger" field
	Clock         Clock          // nil = real time
	Backoff       Backoff        // zero = DefaultBackoff
	// Outbox is told each time the connection is up, so queued replies go
	// out at once instead of after their backoff. Nil: nobody is told.
	Outbox Notifier
	// FetchVersion returns the current WhatsApp Web client version; nil =
	// ask web.whatsapp.com. Tests replace it.
	FetchVersion VersionFetcher
}

// Notifier is told that sending may work again (the daemon's outbox).
type Notifier interface{ Notify() }

// Channel is the WhatsApp channel. Create it with New; it implements
// channel.Channel.
type Channel struct {
	opts    Options
	log     zerolog.Logger
	clock   Clock
	backoff Backoff
	prefix  string // "Andy: ", or "" with OwnNumber
	jitter  func() float64

	// Set by Run; read by Send, SetTyping and the event handler.
	mu     sync.Mutex
	client *whatsmeow.Client
	sink   channel.Sink
	ctx    context.Context // Run's context, for sink calls from whatsmeow's goroutines
	lids   lidResolver
	media  media     // tests' stand-in for client.Download and Upload; nil = the client
	own    types.JID // our phone-number JID
	ownLID types.JID // our LID: the "message yourself" chat may arrive under it

	retryAt atomic.Int64 // unix ns of the next reconnect attempt (NextRetry)

	connected atomic.Bool
	// Connection events from the handler to the reconnect loop. Buffered 1:
	// one pending signal is all the loop needs.
	dropped  chan time.Duration // the connection is gone; the value is a minimum wait
	terminal chan error         // reconnecting cannot help
	up       chan struct{}      // logged in; the backoff starts over
	lastWait time.Duration      // the minimum wait of the last drop (keepConnected's own)

	groupMu      sync.Mutex
	groupNames   map[types.JID]string
	groupsSynced time.Time    // last successful fetch of the group list
	told         channel.Told // what the sink knows of each chat: one chat record per message

	sentMu    sync.Mutex
	sentIDs   map[types.MessageID]struct{} // our own recent sends, to flag their echoes
	delivered map[types.MessageID]struct{} // parts of split messages WhatsApp accepted

	typingMu sync.Mutex
	typing   map[types.JID]chan struct{} // chats with "typing…" kept up: closing stops it

	statusMu sync.Mutex
	status   status
}

var (
	_ channel.Channel  = (*Channel)(nil)
	_ channel.Reporter = (*Channel)(nil)
	_ channel.Retrier  = (*Channel)(nil)
)

// New returns a Channel; nothing happens until Run.
func New(opts Options) *Channel {
	c := &Channel{
		opts:       opts,
		log:        opts.Logger.With().Str("channel", "whatsapp").Logger(),
		clock:      opts.Clock,
		backoff:    opts.Backoff,
		dropped:    make(chan time.Duration, 1),
		terminal:   make(chan error, 1),
		up:         make(chan struct{}, 1),
		groupNames: map[types.JID]string{},
		sentIDs:    map[types.MessageID]struct{}{},
		delivered:  map[types.MessageID]struct{}{},
		typing:     map[types.JID]chan struct{}{},
		ctx:        context.Background(),
		jitter:     rand.Float64,
	}
	if c.clock == nil {
		c.clock = realClock{}
	}
	if c.backoff == (Backoff{}) {
		c.backoff = DefaultBackoff
	}
	if !opts.OwnNumber {
		c.prefix = opts.AssistantName + ": "
	}
	c.status = status{State: stateNotStarted, Since: c.clock.Now()}
	return c
}

// Name implements channel.Channel.
func (c *Channel) Name() string { return "whatsapp" }

// Owns reports whether jid is a WhatsApp user (phone number or LID) or group.
func (c *Channel) Owns(jid string) bool {
	for _, suffix := range []string{"@" + types.DefaultUserServer, "@" + types.GroupServer, "@" + types.HiddenUserServer} {
		if strings.HasSuffix(jid, suffix) && len(jid) > len(suffix) {
			return true
		}
	}
	return false
}

// Connected reports whether the session is logged in on a live socket.
func (c *Channel) Connected() bool {
	cli := c.currentClient()
	return c.connected.Load() && cli != nil && cli.IsConnected()
}

func (c *Channel) currentClient() *whatsmeow.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.client
}

// MessageID derives the WhatsApp message id of outbox row id: the same row
// always becomes the same WhatsApp message, so a resend after a crash is a
// duplicate WhatsApp itself drops instead of a second message in the chat.
// The shape (3EB0 + 18 hex digits) is the one WhatsApp Web uses.
func MessageID(outboxID string) types.MessageID {
	sum := sha256.Sum256([]byte("nanoclawd-outbox:" + outboxID))
	return types.MessageID(whatsmeow.WebMessageIDPrefix + strings.ToUpper(hex.EncodeToString(sum[:9])))
}

// outgoingText is what the chat shows for text.
func (c *Channel) outgoingText(text string) string {
	if c.prefix == "" || strings.HasPrefix(text, c.prefix) {
		return text
	}
	return c.prefix + text
}

// outgoingBody is the text Send hands to WhatsApp: the agent's Markdown in
// WhatsApp's formatting, with the prefix.
func (c *Channel) outgoingBody(text string) string {
	return c.outgoingText(ToWhatsApp(text))
}

// sender is the part of whatsmeow's client Send uses.
type sender interface {
	SendMessage(ctx context.Context, to types.JID, message *waE2E.Message, extra ...whatsmeow.SendRequestExtra) (whatsmeow.SendResponse, error)
	BuildReaction(chat, sender types.JID, id types.MessageID, reaction string) *waE2E.Message
}

// Send implements channel.Channel. A text longer than maxPart is sent as
// several messages split between paragraphs; part i has the id of
// m.ID + "/i", so a resend repeats the same ids, and parts WhatsApp already
// took are not sent again.
func (c *Channel) Send(ctx context.Context, m channel.Outgoing) error {
	to, err := parseJID(m.ChatJID)
	if err != nil {
		return fmt.Errorf("%w: %w", err, channel.ErrUndeliverable)
	}
	cli := c.currentClient()
	if cli == nil || !c.Connected() {
		return fmt.Errorf("send to %s: %w: %w", m.ChatJID, ErrNotConnected, channel.ErrUnavailable)
	}
	if m.ReactTo != "" {
		return c.sendReaction(ctx, cli, to, m)
	}
	return c.sendText(ctx, cli, c.mediaClient(), to, m)
}

// sendReaction sends m.Text as a reaction to the chat's message m.ReactTo.
// WhatsApp keys it by the message's author too: in a direct chat that is
// the other party unless the daemon knows better.
func (c *Channel) sendReaction(ctx context.Context, cli sender, to types.JID, m channel.Outgoing) error {
	author, err := types.ParseJID(m.ReactSender)
	if err != nil || m.ReactSender == "" {
		author = types.EmptyJID
		if to.Server != types.GroupServer {
			author = to
		}
	}
	id := MessageID(m.ID)
	c.rememberSent(id) // its echo is ours, not the owner's
	if _, err := cli.SendMessage(ctx, to, cli.BuildReaction(to, author, m.ReactTo, m.Text), whatsmeow.SendRequestExtra{ID: id}); err != nil {
		return fmt.Errorf("react in %s: %w", to, classifySendError(err))
	}
	return nil
}

// sendText sends m's text, split if long; a file goes with the first
// part as its caption, uploaded through up.
func (c *Channel) sendText(ctx context.Context, cli sender, up media, to types.JID, m channel.Outgoing) error {
	parts := splitText(c.outgoingBody(m.Text), maxPart)
	for i, part := range parts {
		id := MessageID(m.ID)
		if len(parts) > 1 {
			id = MessageID(fmt.Sprintf("%s/%d", m.ID, i))
		}
		if c.wasDelivered(id) {
			continue
		}
		msg := &waE2E.Message{Conversation: proto.String(part)}
		if i == 0 && m.File != nil {
			var err error
			if msg, err = fileMessage(ctx, up, m.File, part); err != nil {
				return fmt.Errorf("send to %s: %w", to, err)
			}
		}
		c.rememberSent(id)
		if _, err := cli.SendMessage(ctx, to, msg, whatsmeow.SendRequestExtra{ID: id}); err != nil {
			return fmt.Errorf("send to %s: %w", to, classifySendError(err))
		}
		if len(parts) > 1 {
			c.markDelivered(id)
		}
	}
	return nil
}

// classifySendError marks what whatsmeow's SendMessage returned for the
// outbox: errors no retry can fix wrap channel.ErrUndeliverable, a lost
// connection channel.ErrUnavailable; the rest stay unexplained.
func classifySendError(err error) error {
	switch {
	case errors.Is(err, whatsmeow.ErrNotInGroup), errors.Is(err, whatsmeow.ErrGroupNotFound),
		errors.Is(err, whatsmeow.ErrUnknownServer), errors.Is(err, whatsmeow.ErrRecipientADJID),
		errors.Is(err, whatsmeow.ErrBroadcastListUnsupported),
		strings.Contains(err.Error(), "no LID found for"): // whatsmeow has no sentinel for it
		return fmt.Errorf("%w: %w", err, channel.ErrUndeliverable)
	case errors.Is(err, whatsmeow.ErrNotConnected), errors.Is(err, whatsmeow.ErrNotLoggedIn),
		// Timeouts are the network's trouble, not the message's: wait.
		errors.Is(err, whatsmeow.ErrMessageTimedOut), errors.Is(err, whatsmeow.ErrIQTimedOut),
		errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", err, channel.ErrUnavailable)
	}
	return err
}

func parseJID(s string) (types.JID, error) {
	jid, err := types.ParseJID(s)
	if err != nil || jid.User == "" {
		return types.JID{}, fmt.Errorf("%q is not a WhatsApp chat id (want e.g. 491701234567@s.whatsapp.net or 1203630@g.us)", s)
	}
	return jid, nil
}

// rememberSent records an id we sent so its echo is flagged as ours. The set
// is bounded: emptied when full, since echoes come back within seconds.
func (c *Channel) rememberSent(id types.MessageID) {
	c.sentMu.Lock()
	defer c.sentMu.Unlock()
	if len(c.sentIDs) >= 4096 {
		clear(c.sentIDs)
	}
	c.sentIDs[id] = struct{}{}
}

// markDelivered records a part of a split message WhatsApp accepted, so a
// retry of the whole message after a later part failed skips it. Bounded
// like sentIDs.
func (c *Channel) markDelivered(id types.MessageID) {
	c.sentMu.Lock()
	defer c.sentMu.Unlock()
	if len(c.delivered) >= 4096 {
		clear(c.delivered)
	}
	c.delivered[id] = struct{}{}
}

func (c *Channel) wasDelivered(id types.MessageID) bool {
	c.sentMu.Lock()
	defer c.sentMu.Unlock()
	_, ok := c.delivered[id]
	return ok
}

func (c *Channel) wasSent(id types.MessageID) bool {
	c.sentMu.Lock()
	defer c.sentMu.Unlock()
	_, ok := c.sentIDs[id]
	return ok
}
