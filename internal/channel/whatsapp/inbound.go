package whatsapp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// lidResolver maps a LID (WhatsApp's privacy id, user@lid) to the phone
// number JID it stands for. whatsmeow's device store implements it.
type lidResolver interface {
	GetPNForLID(ctx context.Context, lid types.JID) (types.JID, error)
}

// handleEvent receives every whatsmeow event. It is registered with
// SynchronousAck, and its result is whatsmeow's "handled" flag: a message is
// acknowledged to WhatsApp only after this returned true, that is after the
// sink persisted it. On false WhatsApp delivers the message again later.
func (c *Channel) handleEvent(evt any) bool {
	switch e := evt.(type) {
	case *events.Message:
		if err := c.onMessage(e); err != nil {
			c.log.Error().Err(err).Str("chat", e.Info.Chat.String()).Str("id", e.Info.ID).
				Msg("could not store an incoming WhatsApp message; it stays unacknowledged and WhatsApp will send it again")
			return false
		}
	case *events.GroupInfo:
		if e.Name != nil {
			c.noteGroup(e.JID, e.Name.Name, e.Timestamp)
		}
	case *events.JoinedGroup:
		c.noteGroup(e.JID, e.Name, c.clock.Now())
	case *events.Connected:
		c.connected.Store(true)
		if err := saveVersion(c.opts.DataDir); err != nil {
			c.log.Warn().Err(err).Msg("could not keep the client version WhatsApp accepted")
		}
		c.setStatus(stateConnected, c.ownJID().String())
		signal(c.up, struct{}{})
		if c.groupsStale() {
			go c.syncGroupsNow()
		}
		if c.opts.Outbox != nil {
			c.opts.Outbox.Notify() // replies queued during the outage go now
		}
		if cli := c.currentClient(); cli != nil {
			ctx, _ := c.sinkContext()
			go c.announceUnavailable(ctx, cli)
		}
	case *events.PushNameSetting:
		if cli := c.currentClient(); cli != nil && c.connected.Load() {
			ctx, _ := c.sinkContext()
			go c.announceUnavailable(ctx, cli)
		}
	case *events.UndecryptableMessage:
		// whatsmeow has already sent a retry receipt to the sender and, with
		// AutomaticMessageRerequestFromPhone, asked our phone for the
		// content; if either answers, the message arrives as usual.
		c.log.Warn().Str("chat", e.Info.Chat.String()).Str("sender", e.Info.Sender.String()).Str("id", e.Info.ID).
			Bool("unavailable", e.IsUnavailable).Str("type", string(e.UnavailableType)).
			Msg("a WhatsApp message could not be decrypted; asked the sender and the phone to send it again")
	case *events.Disconnected:
		c.lost("connection closed", 0)
	case *events.ManualLoginReconnect:
		c.lost("WhatsApp asked for a reconnect (stream error 515)", 0)
	case *events.KeepAliveTimeout:
		// whatsmeow leaves a dead socket alone; after a few missed pings
		// drop it so the reconnect loop can take over.
		if e.ErrorCount >= 3 {
			if cli := c.currentClient(); cli != nil {
				go cli.ResetConnection()
			}
		}
	case *events.ConnectFailure:
		c.lost("WhatsApp refused the connection: "+e.Reason.String(), 0)
	case *events.TemporaryBan:
		c.lost(e.String(), e.Expire)
	case *events.LoggedOut:
		c.stop(fmt.Errorf("%w (%s)", ErrLoggedOut, e.PermanentDisconnectDescription()))
	case *events.StreamReplaced:
		c.stop(ErrStreamReplaced)
	case *events.ClientOutdated:
		c.stop(ErrClientOutdated)
	}
	return true
}

// lost tells the reconnect loop the connection is gone; it waits at least wait.
func (c *Channel) lost(reason string, wait time.Duration) {
	c.connected.Store(false)
	c.setStatus(stateDisconnected, reason)
	signal(c.dropped, wait)
}

// stop tells the reconnect loop to give up with err.
func (c *Channel) stop(err error) {
	c.connected.Store(false)
	c.setStatus(stateStopped, err.Error())
	signal(c.terminal, err)
}

// signal sends v unless a signal is already pending.
func signal[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}

func (c *Channel) ownJID() types.JID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.own
}

// onMessage hands one message to the sink. The sink's OnMessage records
// the message's chat itself; OnChat comes first only for what that does
// not tell (a chat name, that it is a group) and the sink was not told
// yet, or for a message with nothing to store (its chat is still heard).
func (c *Channel) onMessage(e *events.Message) error {
	ctx, sink := c.sinkContext()
	if sink == nil {
		return fmt.Errorf("no sink: Run has not started")
	}
	m, chat, ok := c.inbound(ctx, e)
	if !ok {
		return nil
	}
	empty := m.Text == "" && m.Revokes == "" && m.Media == nil && m.ReactTo == ""
	if empty || !c.told.Knows(chat) {
		if err := c.told.Tell(ctx, sink, chat); err != nil {
			return fmt.Errorf("store chat %s: %w", chat.JID, err)
		}
	}
	if empty {
		return nil
	}
	if err := sink.OnMessage(ctx, m); err != nil {
		return fmt.Errorf("store message %s: %w", m.ID, err)
	}
	return nil
}

func (c *Channel) sinkContext() (context.Context, channel.Sink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctx, c.sink
}

// inbound converts a whatsmeow message. ok is false for what nanoclawd
// ignores: status updates, broadcast lists, newsletters. A message without
// text (sticker, reaction, voice note) still yields its chat, with m.Text "".
func (c *Channel) inbound(ctx context.Context, e *events.Message) (m channel.Message, chat channel.Chat, ok bool) {
	info := e.Info
	if info.Chat.Server == types.BroadcastServer || !c.Owns(info.Chat.ToNonAD().String()) {
		return m, chat, false
	}
	isGroup := info.Chat.Server == types.GroupServer
	chatJID := info.Chat.ToNonAD()
	if !isGroup {
		// In a direct chat the chat id is the other party: the recipient
		// when we sent it, the sender otherwise.
		alt := info.SenderAlt
		if info.IsFromMe {
			alt = info.RecipientAlt
		}
		chatJID = c.phoneJID(ctx, chatJID, alt)
	}
	sender := c.phoneJID(ctx, info.Sender, info.SenderAlt)
	msg := e.Message
	var replaces, revokes string
	if pm := msg.GetProtocolMessage(); pm != nil {
		switch pm.GetType() {
		case waE2E.ProtocolMessage_REVOKE:
			revokes = pm.GetKey().GetID()
		case waE2E.ProtocolMessage_MESSAGE_EDIT:
			replaces, msg = pm.GetKey().GetID(), pm.GetEditedMessage()
		}
	}
	text := messageText(msg)

	chat = channel.Chat{JID: chatJID.String(), IsGroup: isGroup, Time: info.Timestamp}
	if isGroup {
		chat.Name = c.groupName(chatJID)
	} else if !info.IsFromMe {
		chat.Name = info.PushName
	}
	m = channel.Message{
		ID:         string(info.ID),
		ChatJID:    chat.JID,
		SenderJID:  sender.String(),
		SenderName: info.PushName,
		Text:       text,
		Time:       info.Timestamp,
		FromMe:     info.IsFromMe,
		IsBot:      info.IsFromMe && c.isOwnReply(info.ID, text),
		Replaces:   replaces,
		Revokes:    revokes,
	}
	m.Media = c.mediaOf(msg)
	if r := msg.GetReactionMessage(); r != nil {
		m.ReactTo, m.Text = r.GetKey().GetID(), r.GetText() // "" when the sender took it back
	}
	m.Text = c.mentionsToName(contextInfo(msg), m.Text)
	if ci := contextInfo(msg); ci.GetQuotedMessage() != nil {
		m.QuotedID = ci.GetStanzaID()
		m.QuotedText = messageText(ci.GetQuotedMessage())
		if m.QuotedText == "" {
			m.QuotedText = describe(ci.GetQuotedMessage())
		}
		if p := ci.GetParticipant(); p != "" {
			if jid, err := types.ParseJID(p); err == nil {
				m.QuotedSender = jid.User
			}
		}
	}
	return m, chat, true
}

// isOwnReply tells the assistant's replies from the owner's own messages,
// both of which arrive "from me" when they share a number. Flagging them
// is what stops the assistant answering itself.
func (c *Channel) isOwnReply(id types.MessageID, text string) bool {
	return c.opts.OwnNumber || strings.HasPrefix(text, c.prefix) || c.wasSent(id)
}

// phoneJID returns jid without its device part and, when it is a LID, the
// phone-number JID it stands for: from alt when the message carried it,
// else from the store. An unknown LID stays as it is (still a valid chat).
func (c *Channel) phoneJID(ctx context.Context, jid, alt types.JID) types.JID {
	jid = jid.ToNonAD()
	if jid.Server != types.HiddenUserServer {
		return jid
	}
	if alt.Server == types.DefaultUserServer {
		return alt.ToNonAD()
	}
	c.mu.Lock()
	lids, own, ownLID := c.lids, c.own, c.ownLID
	c.mu.Unlock()
	if !ownLID.IsEmpty() && jid == ownLID && !own.IsEmpty() {
		return own
	}
	if lids != nil {
		pn, err := lids.GetPNForLID(ctx, jid)
		if err == nil && !pn.IsEmpty() {
			return pn.ToNonAD()
		}
		if err != nil {
			c.log.Debug().Err(err).Str("lid", jid.String()).Msg("LID lookup failed")
		}
	}
	return jid
}

// mentionsToName rewrites a mention of the assistant's own number (or
// LID), which WhatsApp writes as "@<number>", to "@<assistantName>", so
// that tagging the assistant calls it like its trigger does.
func (c *Channel) mentionsToName(ci *waE2E.ContextInfo, text string) string {
	if ci == nil || c.opts.AssistantName == "" {
		return text
	}
	c.mu.Lock()
	own, ownLID := c.own, c.ownLID
	c.mu.Unlock()
	for _, m := range ci.GetMentionedJID() {
		jid, err := types.ParseJID(m)
		if err != nil || jid.User == "" {
			continue
		}
		if (!own.IsEmpty() && jid.User == own.User) || (!ownLID.IsEmpty() && jid.User == ownLID.User) {
			text = strings.ReplaceAll(text, "@"+jid.User, "@"+c.opts.AssistantName)
		}
	}
	return text
}

// messageText is the text a person typed: the body of a plain or extended
// text message, or the caption of a photo, video or document. whatsmeow
// has already unwrapped ephemeral, view-once and document-with-caption
// envelopes.
func messageText(msg *waE2E.Message) string {
	if msg == nil {
		return ""
	}
	switch {
	case msg.GetConversation() != "":
		return msg.GetConversation()
	case msg.GetExtendedTextMessage().GetText() != "":
		return msg.GetExtendedTextMessage().GetText()
	case msg.GetImageMessage().GetCaption() != "":
		return msg.GetImageMessage().GetCaption()
	case msg.GetVideoMessage().GetCaption() != "":
		return msg.GetVideoMessage().GetCaption()
	case msg.GetDocumentMessage().GetCaption() != "":
		return msg.GetDocumentMessage().GetCaption()
	}
	return ""
}

// media is the part of whatsmeow's client that fetches and uploads
// media: inbound images, files sent with a message (media.go).
type media interface {
	Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error)
	Upload(ctx context.Context, plaintext []byte, appInfo whatsmeow.MediaType) (whatsmeow.UploadResponse, error)
}

func (c *Channel) mediaClient() media {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.media != nil {
		return c.media
	}
	if c.client != nil {
		return c.client
	}
	return nil
}
