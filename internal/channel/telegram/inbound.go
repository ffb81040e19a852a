package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	tg "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/prompt"
)

// handle hands one update to sink; nil means it is stored (or is nothing
// to store) and its offset may be confirmed.
func (c *Channel) handle(ctx context.Context, sink channel.Sink, u *models.Update) error {
	switch {
	case u.Message != nil:
		return c.onMessage(ctx, sink, u.Message, false)
	case u.EditedMessage != nil:
		return c.onMessage(ctx, sink, u.EditedMessage, true)
	case u.MessageReaction != nil:
		return c.onReaction(ctx, sink, u.ID, u.MessageReaction)
	case u.MyChatMember != nil:
		// The bot was added to (or removed from) a chat: listed by
		// 'telegram chats' before anyone writes there.
		return c.seen(ctx, sink, u.MyChatMember.Chat, time.Unix(int64(u.MyChatMember.Date), 0), false)
	}
	return nil
}

// seen records a chat the bot has heard of, in the channel's own table
// and with the sink — unless a message follows (withMessage) whose
// OnMessage records the chat, and the sink knows its name and kind.
func (c *Channel) seen(ctx context.Context, sink channel.Sink, chat models.Chat, at time.Time, withMessage bool) error {
	if err := c.recordChat(ctx, chat, at); err != nil {
		return err
	}
	ch := channel.Chat{JID: JID(chat.ID), Name: chatTitle(chat), IsGroup: isGroup(chat), Time: at}
	if withMessage && c.told.Knows(ch) {
		return nil
	}
	return c.told.Tell(ctx, sink, ch)
}

func (c *Channel) onMessage(ctx context.Context, sink channel.Sink, msg *models.Message, edited bool) error {
	at := time.Unix(int64(msg.Date), 0)
	m := c.message(ctx, msg)
	// A service message (joined, pinned, title changed) has nothing to
	// store: its chat is still heard.
	service := m.Text == "" && m.Media == nil
	if err := c.seen(ctx, sink, msg.Chat, at, !service); err != nil {
		return err
	}
	if edited {
		// Telegram keeps the id of an edited message; the edit is stored
		// as a message of its own that replaces it.
		m.Replaces = m.ID
		m.ID = fmt.Sprintf("%d.edit%d", msg.ID, msg.EditDate)
		m.Time = time.Unix(int64(msg.EditDate), 0)
	}
	if service {
		return nil
	}
	return sink.OnMessage(ctx, m)
}

// message is msg as the router takes it.
func (c *Channel) message(ctx context.Context, msg *models.Message) channel.Message {
	jid := JID(msg.Chat.ID)
	m := channel.Message{ID: strconv.Itoa(msg.ID), ChatJID: jid, Time: time.Unix(int64(msg.Date), 0), Text: msg.Text}
	if msg.Text == "" {
		m.Text = msg.Caption
	}
	switch {
	case msg.From != nil:
		m.SenderJID, m.SenderName = JID(msg.From.ID), userName(msg.From)
		m.FromMe = c.isOwner(ctx, msg.From.ID, msg.Chat)
		if me := c.me.Load(); me != nil && msg.From.ID == me.ID {
			m.IsBot = true
		}
	case msg.SenderChat != nil: // an anonymous admin, or a channel post
		m.SenderJID, m.SenderName = JID(msg.SenderChat.ID), chatTitle(*msg.SenderChat)
	}
	if r := msg.ReplyToMessage; r != nil {
		m.QuotedID = strconv.Itoa(r.ID)
		if r.From != nil {
			m.QuotedSender = userName(r.From)
		}
		m.QuotedText = r.Text
		if m.QuotedText == "" {
			m.QuotedText = r.Caption
		}
	}
	m.Media = c.media(msg)
	if isGroup(msg.Chat) && c.addressed(msg) {
		m.Text = c.withTrigger(ctx, jid, m.Text)
	}
	return m
}

// addressed tells whether a group message names the bot (@username, in
// any case, with or without Telegram's mention entity; also a command
// addressed to it, /cmd@username) or replies to one of its messages.
func (c *Channel) addressed(msg *models.Message) bool {
	me := c.me.Load()
	if me == nil {
		return false
	}
	if r := msg.ReplyToMessage; r != nil && r.From != nil && r.From.ID == me.ID {
		return true
	}
	re := c.mention.Load()
	return re != nil && re.MatchString(msg.Text+"\n"+msg.Caption)
}

// mentionRE finds @username as a whole name: "@nano_bot," yes,
// "@nano_bots" and "mail@nano_bot" no, "/start@nano_bot" yes.
func mentionRE(username string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)(?:^|[^A-Za-z0-9_@]|/[A-Za-z0-9_]+)@` + regexp.QuoteMeta(username) + `(?:$|[^A-Za-z0-9_])`)
}

// withTrigger puts the group's trigger in front of text that calls the
// bot another way, so that the router, which knows only the trigger, sees
// the call. A leading @username gives way to it.
func (c *Channel) withTrigger(ctx context.Context, jid, text string) string {
	if c.opts.Trigger == nil {
		return text
	}
	trigger := c.opts.Trigger(ctx, jid)
	// As the router reads it: "@Andy" is not in "@andy_test_bot".
	if trigger == "" || prompt.Triggers(text, trigger) {
		return text
	}
	if me := c.me.Load(); me != nil && prompt.Triggers(text, "@"+me.Username) {
		text = strings.TrimLeft(strings.TrimSpace(text)[len(me.Username)+1:], " ,:")
	}
	return strings.TrimSpace(trigger + " " + text)
}

// media describes the file msg carries, fetched only when the router
// stores it for a registered chat.
func (c *Channel) media(msg *models.Message) *channel.Media {
	var md channel.Media
	var fileID string
	switch {
	case msg.Voice != nil:
		v := msg.Voice
		md, fileID = channel.Media{Kind: channel.MediaVoice, MimeType: or(v.MimeType, "audio/ogg; codecs=opus"), Size: v.FileSize, Seconds: v.Duration}, v.FileID
	case msg.Audio != nil:
		a := msg.Audio
		md, fileID = channel.Media{Kind: channel.MediaAudio, MimeType: or(a.MimeType, "audio/mpeg"), Name: a.FileName, Size: a.FileSize, Seconds: a.Duration}, a.FileID
	case len(msg.Photo) > 0:
		p := msg.Photo[len(msg.Photo)-1] // the sizes come smallest first
		md, fileID = channel.Media{Kind: channel.MediaImage, MimeType: "image/jpeg", Size: int64(p.FileSize)}, p.FileID
	case msg.Animation != nil:
		a := msg.Animation
		md, fileID = channel.Media{Kind: channel.MediaVideo, MimeType: or(a.MimeType, "video/mp4"), Name: a.FileName, Size: a.FileSize, Seconds: a.Duration}, a.FileID
	case msg.Video != nil:
		v := msg.Video
		md, fileID = channel.Media{Kind: channel.MediaVideo, MimeType: or(v.MimeType, "video/mp4"), Name: v.FileName, Size: v.FileSize, Seconds: v.Duration}, v.FileID
	case msg.VideoNote != nil:
		v := msg.VideoNote
		md, fileID = channel.Media{Kind: channel.MediaVideo, MimeType: "video/mp4", Size: int64(v.FileSize), Seconds: v.Duration}, v.FileID
	case msg.Sticker != nil:
		s := msg.Sticker
		typ := "image/webp"
		if s.IsVideo {
			typ = "video/webm"
		} else if s.IsAnimated {
			typ = "application/x-tgsticker"
		}
		md, fileID = channel.Media{Kind: channel.MediaSticker, MimeType: typ, Size: int64(s.FileSize)}, s.FileID
	case msg.Document != nil:
		d := msg.Document
		md, fileID = channel.Media{Kind: channel.MediaDocument, MimeType: or(d.MimeType, "application/octet-stream"), Name: d.FileName, Size: d.FileSize}, d.FileID
	default:
		return nil
	}
	md.Fetch = func(ctx context.Context) ([]byte, error) { return c.download(ctx, fileID, md.Size) }
	return &md
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// botDownloadMax is the largest file the Bot API lets a bot download
// (getFile refuses larger ones); maxBytes is the default of Options.MaxBytes.
const (
	botDownloadMax = 20 << 20
	maxBytes       = 20 << 20
)

// download fetches a file: getFile names its path, which is then read
// from {apiURL}/file/bot{token}/{path}. A file over a limit is refused
// with a TooBigError, never cut short and kept as if whole; size is what
// the message announced (0: unknown).
func (c *Channel) download(ctx context.Context, fileID string, size int64) ([]byte, error) {
	limit := int64(maxBytes)
	if c.opts.MaxBytes != nil {
		limit = int64(c.opts.MaxBytes())
	}
	f, err := c.bot.GetFile(ctx, &tg.GetFileParams{FileID: fileID})
	if errors.Is(err, tg.ErrorBadRequest) && size > botDownloadMax {
		return nil, &channel.TooBigError{Size: size, Limit: botDownloadMax, Why: "Telegram lets a bot download files up to 20 MB"}
	}
	if err != nil {
		return nil, fmt.Errorf("telegram getFile: %w", c.redact.Err(err))
	}
	if f.FilePath == "" {
		return nil, fmt.Errorf("telegram getFile: no file_path (files over 20 MB cannot be downloaded by a bot)")
	}
	if f.FileSize > 0 {
		size = f.FileSize
	}
	if size > limit {
		return nil, &channel.TooBigError{Size: size, Limit: limit, Why: "media.maxBytes"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.opts.APIURL+"/file/bot"+c.opts.Token+"/"+f.FilePath, nil)
	if err != nil {
		return nil, fmt.Errorf("telegram download: %w", c.redact.Err(err))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("telegram download: %w", c.redact.Err(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("telegram download: HTTP %d", resp.StatusCode)
	}
	if resp.ContentLength > limit {
		return nil, &channel.TooBigError{Size: resp.ContentLength, Limit: limit, Why: "media.maxBytes"}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("telegram download: %w", c.redact.Err(err))
	case int64(len(data)) > limit:
		return nil, &channel.TooBigError{Limit: limit, Why: "media.maxBytes"}
	case size > 0 && int64(len(data)) != size:
		return nil, fmt.Errorf("telegram download: %d of the file's %d bytes arrived", len(data), size)
	}
	return data, nil
}

// onReaction stores a reaction as a message of its own. Its id is the
// update's, the same at every redelivery.
func (c *Channel) onReaction(ctx context.Context, sink channel.Sink, updateID int64, r *models.MessageReactionUpdated) error {
	at := time.Unix(int64(r.Date), 0)
	if err := c.seen(ctx, sink, r.Chat, at, true); err != nil {
		return err
	}
	m := channel.Message{ID: "r" + strconv.FormatInt(updateID, 10), ChatJID: JID(r.Chat.ID), Time: at, ReactTo: strconv.Itoa(r.MessageID)}
	switch {
	case r.User != nil:
		m.SenderJID, m.SenderName = JID(r.User.ID), userName(r.User)
		m.FromMe = c.isOwner(ctx, r.User.ID, r.Chat)
	case r.ActorChat != nil:
		m.SenderJID, m.SenderName = JID(r.ActorChat.ID), chatTitle(*r.ActorChat)
	}
	for _, t := range r.NewReaction {
		if t.Type == models.ReactionTypeTypeEmoji && t.ReactionTypeEmoji != nil {
			m.Text = t.ReactionTypeEmoji.Emoji
			break
		}
	}
	if m.Text == "" && len(r.NewReaction) > 0 {
		m.Text = "(custom emoji)"
	}
	return sink.OnMessage(ctx, m)
}

func userName(u *models.User) string {
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	if name == "" {
		name = u.Username
	}
	if name == "" {
		name = strconv.FormatInt(u.ID, 10)
	}
	return name
}

func chatTitle(c models.Chat) string {
	if c.Title != "" {
		return c.Title
	}
	if name := strings.TrimSpace(c.FirstName + " " + c.LastName); name != "" {
		return name
	}
	return c.Username
}

func isGroup(c models.Chat) bool {
	return c.Type == models.ChatTypeGroup || c.Type == models.ChatTypeSupergroup
}
