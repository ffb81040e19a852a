// Package channel defines what a chat network (WhatsApp, the local socket)
// looks like to the rest of nanoclawd: something that delivers inbound
// messages and accepts outbound text for the chats it owns.
package channel

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors a Channel's Send wraps so the outbox knows what a failure means.
// A Send error wrapping neither is unexplained: retried with backoff, for a
// bounded time.
var (
	// ErrUndeliverable: retrying cannot help (the chat is gone, the account
	// is not in it, the address is malformed). The message is dropped and
	// the owner told; later messages to the chat still go out.
	ErrUndeliverable = errors.New("the message can never be delivered")
	// ErrUnavailable: the channel is down (not connected, not paired).
	// The message waits, however long the outage lasts.
	ErrUnavailable = errors.New("the channel is down for now")
)

// Message is one inbound chat message.
type Message struct {
	ID         string    // unique within the chat
	ChatJID    string    // the chat it was posted in
	SenderJID  string    // the sender's JID (WhatsApp) or id (local channel); SenderName is who it is
	SenderName string    // display name
	Text       string    // plain text (captions included)
	Time       time.Time // when it was sent
	FromMe     bool      // sent from the owner's own account
	IsBot      bool      // one of our own replies echoed back
	// A reply to an earlier message: its id (when the channel knows it),
	// who wrote it and what it said.
	QuotedID     string
	QuotedSender string
	QuotedText   string
	// Replaces is the ID of an earlier message of the chat that this one
	// edits (Text is the new text); Revokes the ID of one its sender
	// deleted (Text is empty). Both empty for an ordinary message.
	Replaces, Revokes string
	// Media is a file sent with the message (Text is its caption). It is
	// fetched only for a registered chat, by whoever stores it.
	Media *Media
	// ReactTo is the id of an earlier message of the chat this one reacts
	// to; Text is then the emoji ("" when the sender took a reaction back).
	ReactTo string
}

// Kinds of inbound media, as the prompt names them.
const (
	MediaImage    = "image"
	MediaVoice    = "voice note" // recorded in the chat (WhatsApp's push-to-talk)
	MediaAudio    = "audio"      // an audio file sent as such
	MediaVideo    = "video"
	MediaDocument = "document"
	MediaSticker  = "sticker"
)

// Media is an inbound file, downloaded on demand.
type Media struct {
	Kind     string                                    // one of the Media* kinds
	MimeType string                                    // as the sender's app gave it, e.g. "audio/ogg; codecs=opus"
	Name     string                                    // the file name the sender gave (documents); "" if none
	Size     int64                                     // as announced by the sender; 0 if unknown
	Seconds  int                                       // length of audio or video as announced; 0 if unknown
	Fetch    func(ctx context.Context) ([]byte, error) // the decrypted bytes
}

// TooBigError is a Media.Fetch that refused a file larger than a limit:
// the file is not saved, and the prompt says why. Size is 0 when only
// "over Limit" is known.
type TooBigError struct {
	Size, Limit int64
	Why         string // whose limit, e.g. "media.maxBytes"
}

func (e *TooBigError) Error() string {
	return fmt.Sprintf("larger than the %d-byte limit (%s)", e.Limit, e.Why)
}

// Chat is metadata about a chat seen on a channel, registered or not.
type Chat struct {
	JID     string
	Name    string
	IsGroup bool
	Time    time.Time // last activity
}

// Outgoing is one message to send.
type Outgoing struct {
	ID      string // stable idempotency key (the outbox row)
	ChatJID string
	Text    string // with File: its caption; with ReactTo: the emoji
	File    *Attachment
	// ReactTo, when set, makes this a reaction (Text the emoji) to the
	// chat's message with that id, written by ReactSender (a JID on
	// WhatsApp, which names the author in a reaction's key).
	ReactTo, ReactSender string
}

// Attachment is a file sent with a message (an agent's send_message with
// a file). Path is the daemon's own copy, made when the request was
// decided, so what is sent cannot change after it was checked; the outbox
// removes it once the message is sent or given up.
type Attachment struct {
	Name string // the file's base name, as the chat shows it
	MIME string // e.g. image/png, application/pdf
	Path string // the daemon's copy (under layout.Layout.Outgoing)
}

// Sink receives what a channel hears. OnMessage must have persisted the
// message when it returns nil; a channel acknowledges upstream only then.
// OnMessage records the message's chat (its JID and time) itself; OnChat
// tells what a message does not: a chat's name and kind, or a chat heard
// without a message to store.
type Sink interface {
	OnMessage(ctx context.Context, m Message) error
	OnChat(ctx context.Context, c Chat) error
}

// Channel is one chat network.
type Channel interface {
	// Name is a short identifier ("whatsapp", "local").
	Name() string
	// Owns reports whether jid belongs to this channel.
	Owns(jid string) bool
	// Run connects and delivers inbound traffic to sink until ctx ends.
	Run(ctx context.Context, sink Sink) error
	// Send delivers m. It returns nil only once the network accepted the
	// message; on error the caller keeps it and retries, unless the error
	// wraps ErrUndeliverable. m.ID is stable across retries, so a channel
	// that can uses it to drop a repeat.
	Send(ctx context.Context, m Outgoing) error
	// SetTyping shows or clears a typing indicator in jid (best effort).
	SetTyping(ctx context.Context, jid string, on bool) error
	// Connected reports whether Send can currently succeed.
	Connected() bool
}

// Optional abilities: a channel has them or not, and the daemon asks.

// Opener is a channel with a socket of its own to bind before it runs, so
// that a client started once the daemon says "running" finds it (local).
type Opener interface {
	Open() error
}

// Reporter is a channel that describes its connection in one line for
// `nanoclawd status` (whatsapp, telegram, local).
type Reporter interface {
	Status() string
}

// Retrier is a channel that reconnects on its own schedule and says when
// it tries next (whatsapp).
type Retrier interface {
	NextRetry() time.Time
}

// Set is the enabled channels; each chat belongs to the one that owns it.
// Its methods take a pointer so that a part built before the channels (the
// outbox, which the WhatsApp channel itself needs) sees them once added.
type Set []Channel

// Send delivers m through the channel that owns its chat.
func (s *Set) Send(ctx context.Context, m Outgoing) error {
	if ch := s.owner(m.ChatJID); ch != nil {
		return ch.Send(ctx, m)
	}
	return fmt.Errorf("no enabled channel handles chat %s (enable it under channels in the config)", m.ChatJID)
}

// SetTyping shows or clears the typing indicator in jid, best effort.
func (s *Set) SetTyping(ctx context.Context, jid string, on bool) {
	if ch := s.owner(jid); ch != nil {
		_ = ch.SetTyping(ctx, jid, on)
	}
}

// NameOf names the channel that owns jid, "other" for none enabled.
func (s *Set) NameOf(jid string) string {
	if ch := s.owner(jid); ch != nil {
		return ch.Name()
	}
	return "other"
}

func (s *Set) owner(jid string) Channel {
	for _, ch := range *s {
		if ch.Owns(jid) {
			return ch
		}
	}
	return nil
}
