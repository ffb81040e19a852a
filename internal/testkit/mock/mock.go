// Package mock holds stand-ins for the small interfaces nanoclawd declares
// where it uses them: structs whose methods call func fields, so each test
// says exactly what the stand-in does.
package mock

import (
	"context"
	"io"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// Pairer is a setup.Pairer.
type Pairer struct {
	PairedFn func(ctx context.Context) (own string, ok bool, err error)
	PairFn   func(ctx context.Context, phone string, out io.Writer) (own string, err error)
}

func (p *Pairer) Paired(ctx context.Context) (string, bool, error) { return p.PairedFn(ctx) }

func (p *Pairer) Pair(ctx context.Context, phone string, out io.Writer) (string, error) {
	return p.PairFn(ctx, phone, out)
}

// Channel is a channel.Channel.
type Channel struct {
	NameFn      func() string
	OwnsFn      func(jid string) bool
	RunFn       func(ctx context.Context, sink channel.Sink) error
	SendFn      func(ctx context.Context, m channel.Outgoing) error
	SetTypingFn func(ctx context.Context, jid string, on bool) error
	ConnectedFn func() bool
}

func (c *Channel) Name() string                                     { return c.NameFn() }
func (c *Channel) Owns(jid string) bool                             { return c.OwnsFn(jid) }
func (c *Channel) Run(ctx context.Context, sink channel.Sink) error { return c.RunFn(ctx, sink) }
func (c *Channel) Send(ctx context.Context, m channel.Outgoing) error {
	return c.SendFn(ctx, m)
}
func (c *Channel) SetTyping(ctx context.Context, jid string, on bool) error {
	return c.SetTypingFn(ctx, jid, on)
}
func (c *Channel) Connected() bool { return c.ConnectedFn() }

// MainChat names the main group (outbox.MainChat, alerts.MainChat).
type MainChat struct {
	MainChatFn func(ctx context.Context) (folder, jid string, ok bool)
}

func (m *MainChat) MainChat(ctx context.Context) (string, string, bool) { return m.MainChatFn(ctx) }

// Link is an alerts.Link.
type Link struct {
	OutageFn func() (since time.Time, loggedOut bool)
}

func (l *Link) Outage() (time.Time, bool) { return l.OutageFn() }
