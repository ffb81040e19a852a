// Package channel defines what a chat network (WhatsApp, the local socket)
// looks like to the rest of nanoclawd: something that delivers inbound
// messages and accepts outbound text for the chats it owns.
package channel

import (
	"context"
	"time"
)

// Message is one inbound chat message.
type Message struct {
	ID         string    // unique within the chat
	ChatJID    string    // the chat it was posted in
	Sender     string    // sender's JID or id
	SenderName string    // display name
	Text       string    // plain text (captions included)
	Time       time.Time // when it was sent
	FromMe     bool      // sent from the owner's own account
	IsBot      bool      // one of our own replies echoed back
	// A reply to an earlier message: who wrote it and what it said.
	QuotedSender string
	QuotedText   string
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
	Text    string
}

// Sink receives what a channel hears. OnMessage must have persisted the
// message when it returns nil; a channel acknowledges upstream only then.
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
	// message; on error the caller keeps it and retries. m.ID is stable
	// across retries, so a channel that can uses it to drop a repeat.
	Send(ctx context.Context, m Outgoing) error
	// SetTyping shows or clears a typing indicator in jid (best effort).
	SetTyping(ctx context.Context, jid string, on bool) error
	// Connected reports whether Send can currently succeed.
	Connected() bool
}
