package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/media"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/runner"
)

// The router as channel.Sink: what channels deliver is stored, and a
// message that calls the assistant queues a run of its group.

var _ channel.Sink = (*Router)(nil)

// OnChat records chat metadata for any chat, registered or not.
func (r *Router) OnChat(ctx context.Context, c channel.Chat) error {
	return r.Messages.RecordChat(ctx, c)
}

// OnMessage stores m (content only for registered groups) and starts or
// feeds the group's agent when m calls for it. It returns once m is
// durable.
func (r *Router) OnMessage(ctx context.Context, m channel.Message) error {
	arrived := time.Now()
	if m.Time.IsZero() {
		m.Time = arrived
	}
	if err := r.OnChat(ctx, channel.Chat{JID: m.ChatJID, Time: m.Time}); err != nil {
		return fmt.Errorf("store chat: %w", err)
	}
	g, err := r.Groups.ByJID(ctx, m.ChatJID)
	if errors.Is(err, groups.ErrNotFound) {
		if !m.IsBot {
			r.heardUnregistered(m.ChatJID)
		}
		return nil
	}
	if err != nil {
		return err
	}
	r.unheard.forget(m.ChatJID)
	if r.Owner != nil {
		// The owner's commands are the daemon's, taken before any agent
		// could see them.
		if done, err := r.Owner.Handle(ctx, g, m); done || err != nil {
			return err
		}
	}
	if m.Replaces != "" || m.Revokes != "" {
		if done, err := r.onChange(ctx, g, &m); done || err != nil {
			return err
		}
	}
	if m.QuotedID != "" {
		// The chat's own record says more than the channel's copy: the
		// name shown, a file's marker and transcript. The local channel
		// names only the id.
		if _, name, text, ok, err := r.Messages.Lookup(ctx, m.ChatJID, m.QuotedID); err == nil && ok {
			m.QuotedSender, m.QuotedText = name, text
		}
	}
	var file media.Received
	if m.Media != nil && !m.IsBot && !r.known(ctx, m) {
		file = r.Media.Receive(ctx, g, m)
	}
	seq, added, err := r.Messages.Add(ctx, m, file.Marker)
	if err != nil || !added || m.IsBot {
		r.Media.Drop(m.ChatJID, file)
		return err // nil for a redelivery, or our own reply echoed back
	}
	r.arrived.note(m.ChatJID, seq, arrived)
	if m.ReactTo != "" {
		return nil // a reaction is context for the next run, never a call
	}
	if file.Later() {
		r.Media.Transcribe(g, m, file, func() { r.maybeRun(g, m.SenderJID, m.Text) })
		return nil // it may call the assistant once its text is there
	}
	cfg := r.Config()
	if word := cfg.Agent.NewSessionCommand; word != "" && strings.EqualFold(strings.TrimSpace(m.Text), word) && g.MayReset(m.SenderJID) {
		return r.newSession(ctx, g, seq)
	}
	r.maybeRun(g, m.SenderJID, m.Text)
	return nil
}

// known tells a redelivered message (whose file is saved already, and
// must not be replaced by what a second copy carries).
func (r *Router) known(ctx context.Context, m channel.Message) bool {
	_, _, _, ok, err := r.Messages.Lookup(ctx, m.ChatJID, m.ID)
	return ok || err != nil
}

// newSession handles the chat's "/new": the group's next run starts a
// fresh agent session. Everything said so far, this message included,
// counts as answered, together with the reply that says so.
func (r *Router) newSession(ctx context.Context, g groups.Group, seq int64) error {
	if _, err := r.Messages.ResetSession(ctx, g.Folder); err != nil {
		return fmt.Errorf("clear the session of %s: %w", g.Folder, err)
	}
	r.Log.Info().Str("group", g.Folder).Msg("the chat asked for a new conversation")
	r.RefreshWarm(ctx) // its agent started ahead holds the old one
	if r.Queue.Running(g.Folder) {
		// The agent going now holds the old conversation: ask it to finish,
		// so the next message gets the fresh one without waiting for idle.
		if err := runner.Close(ctx, string(r.Config().Layout().IPC(g.Folder)), r.Reporter); err != nil {
			r.Log.Warn().Err(err).Str("group", g.Folder).Msg("ask the running agent to finish")
		}
	}
	return r.Messages.Answer(ctx, r.Outbox, messages.Answer{ReplyTo: g.JID, Text: "Fresh start: the next message begins a new conversation.",
		Kind: outbox.KindNotice, Chat: g.JID, UpTo: seq})
}

// onChange applies an edit or a deletion to a message the agent has not
// answered yet: a deleted one is removed, so it never reaches the agent as
// if it were current; an edited one gets its new text. done is false when
// the message is already answered (or unknown): then an edit is stored as
// a new message, marked "(edited)", and a deletion is dropped.
func (r *Router) onChange(ctx context.Context, g groups.Group, m *channel.Message) (done bool, err error) {
	if m.Revokes != "" {
		return true, r.Messages.Revoke(ctx, m.ChatJID, m.Revokes)
	}
	edited, err := r.Messages.Edit(ctx, m.ChatJID, m.Replaces, m.Text)
	if err != nil {
		return true, err
	}
	if !edited {
		m.Text = "(edited) " + m.Text
		return false, nil
	}
	r.maybeRun(g, m.SenderJID, m.Text)
	return true, nil
}

// maybeRun queues a run of g for a new (or newly edited) message: while an
// agent runs there, or when the message calls the assistant.
func (r *Router) maybeRun(g groups.Group, sender, text string) {
	if g.Paused {
		r.Log.Info().Str("group", g.Folder).Msg("group paused by the owner: the message waits for /resume")
		return
	}
	if r.Queue.Running(g.Folder) || g.Calls(sender, text) {
		r.Queue.EnqueueMessages(g.Folder)
	}
}
