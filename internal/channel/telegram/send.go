package telegram

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	tg "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// Send implements channel.Channel: text (as HTML, in parts of at most 4096
// characters), a file with its caption, or a reaction. A 429 is waited out
// (retry_after) and the request made again; a 403 (the bot was blocked or
// removed) gives the message up, which the outbox tells the main chat, and
// shows in status.
func (c *Channel) Send(ctx context.Context, m channel.Outgoing) error {
	chat, err := ChatID(m.ChatJID)
	if err != nil {
		return fmt.Errorf("telegram: %w: %w", err, channel.ErrUndeliverable)
	}
	switch {
	case m.ReactTo != "":
		err = c.react(ctx, chat, m)
	case m.File != nil:
		err = c.sendFile(ctx, chat, m)
	default:
		err = c.sendText(ctx, chat, m.ID, m.Text)
	}
	if err != nil {
		return c.explain(m.ChatJID, err)
	}
	if m.ReactTo == "" {
		// Telegram clears "typing…" at the bot's message: so does the channel.
		c.typing.stop(m.ChatJID)
	}
	c.mu.Lock()
	delete(c.blocked, m.ChatJID)
	delete(c.delivered, m.ID)
	c.mu.Unlock()
	return nil
}

// sendText sends the parts of text Telegram has not accepted yet.
func (c *Channel) sendText(ctx context.Context, chat int64, id, text string) error {
	return c.sendParts(ctx, id, splitText(text, maxText), func(_ int, part string) error { return c.sendHTML(ctx, chat, part) })
}

// sendParts sends the parts of one outgoing message in order, each with
// send (given its index), skipping those Telegram accepted before: a
// retry after a failure in the middle does not repeat the first parts.
func (c *Channel) sendParts(ctx context.Context, id string, parts []string, send func(i int, part string) error) error {
	c.mu.Lock()
	done := c.delivered[id]
	c.mu.Unlock()
	for i := done; i < len(parts); i++ {
		if err := c.call(ctx, func() error { return send(i, parts[i]) }); err != nil {
			return err
		}
		c.mu.Lock()
		c.delivered[id] = i + 1
		c.mu.Unlock()
	}
	return nil
}

// sendHTML sends one part as HTML; should Telegram still refuse the markup,
// the same text goes out plain rather than not at all.
func (c *Channel) sendHTML(ctx context.Context, chat int64, md string) error {
	_, err := c.bot.SendMessage(ctx, &tg.SendMessageParams{ChatID: chat, Text: ToHTML(md), ParseMode: models.ParseModeHTML})
	if errors.Is(err, tg.ErrorBadRequest) && strings.Contains(err.Error(), "parse entities") {
		_, err = c.bot.SendMessage(ctx, &tg.SendMessageParams{ChatID: chat, Text: md})
	}
	return err
}

// sendFile sends an image as a photo and anything else as a document,
// with as much of the text as a caption takes; the rest follows as
// messages.
func (c *Channel) sendFile(ctx context.Context, chat int64, m channel.Outgoing) error {
	data, err := os.ReadFile(m.File.Path)
	if err != nil {
		return fmt.Errorf("the file to send is gone: %w: %w", err, channel.ErrUndeliverable)
	}
	caption, rest := cutText(m.Text, maxCaption)
	parts := append([]string{caption}, splitText(rest, maxText)...)
	photo := strings.HasPrefix(m.File.MIME, "image/") && m.File.MIME != "image/gif" && m.File.MIME != "image/svg+xml"
	return c.sendParts(ctx, m.ID, parts, func(i int, part string) error {
		if i > 0 {
			return c.sendHTML(ctx, chat, part)
		}
		upload := &models.InputFileUpload{Filename: m.File.Name, Data: bytes.NewReader(data)} // one per try: read once
		var err error
		if photo {
			_, err = c.bot.SendPhoto(ctx, &tg.SendPhotoParams{ChatID: chat, Photo: upload, Caption: ToHTML(part), ParseMode: models.ParseModeHTML})
		} else {
			_, err = c.bot.SendDocument(ctx, &tg.SendDocumentParams{ChatID: chat, Document: upload, Caption: ToHTML(part), ParseMode: models.ParseModeHTML})
		}
		return err
	})
}

// react sets (or, with no emoji, clears) the bot's reaction.
func (c *Channel) react(ctx context.Context, chat int64, m channel.Outgoing) error {
	msg, err := strconv.Atoi(m.ReactTo)
	if err != nil {
		return fmt.Errorf("%q is not a Telegram message id: %w", m.ReactTo, channel.ErrUndeliverable)
	}
	reaction := []models.ReactionType{}
	if m.Text != "" {
		reaction = append(reaction, models.ReactionType{Type: models.ReactionTypeTypeEmoji, ReactionTypeEmoji: &models.ReactionTypeEmoji{Emoji: m.Text}})
	}
	return c.call(ctx, func() error {
		_, err := c.bot.SetMessageReaction(ctx, &tg.SetMessageReactionParams{ChatID: chat, MessageID: msg, Reaction: reaction})
		return err
	})
}

// call makes one request, waiting out flood control: Telegram's 429 says
// how long (retry_after), and until then no request of this bot goes out.
// Past MaxWait in all, the message goes back to the outbox, which keeps it.
func (c *Channel) call(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(c.opts.MaxWait)
	for {
		if err := c.waitFlood(ctx); err != nil {
			return err
		}
		err := f()
		if !c.flooded(err) {
			if err == nil || !isNetErr(err) {
				c.up()
			}
			return err
		}
		c.mu.Lock()
		until := c.floodUntil
		c.mu.Unlock()
		if until.After(deadline) {
			return fmt.Errorf("Telegram asks to wait until %s before sending (429): %w", until.Format(time.TimeOnly), channel.ErrUnavailable)
		}
	}
}

// flooded tells whether err is Telegram's 429 (flood control), and if so
// holds every request of the bot back for the retry_after it names.
func (c *Channel) flooded(err error) bool {
	var flood *tg.TooManyRequestsError
	if !errors.As(err, &flood) {
		return false
	}
	wait := time.Duration(max(flood.RetryAfter, 1)) * time.Second
	c.log.Warn().Dur("retry_after", wait).Msg("Telegram flood control (429): no request until it has passed")
	c.floodWait(wait)
	return true
}

// floodWait holds every request back for d.
func (c *Channel) floodWait(d time.Duration) {
	c.mu.Lock()
	if t := time.Now().Add(d); t.After(c.floodUntil) {
		c.floodUntil = t
	}
	c.mu.Unlock()
}

func (c *Channel) waitFlood(ctx context.Context) error {
	c.mu.Lock()
	wait := time.Until(c.floodUntil)
	c.mu.Unlock()
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// explain makes a Bot API error one the outbox acts on: given up
// (ErrUndeliverable) when Telegram says the chat cannot take it, waiting
// (ErrUnavailable) when Telegram cannot be reached, else retried.
func (c *Channel) explain(jid string, err error) error {
	var migrate *tg.MigrateError
	switch {
	case errors.Is(err, channel.ErrUndeliverable), errors.Is(err, channel.ErrUnavailable):
		return fmt.Errorf("telegram: %w", err)
	case errors.Is(err, tg.ErrorForbidden):
		c.mu.Lock()
		if _, ok := c.blocked[jid]; !ok {
			c.blocked[jid] = time.Now()
		}
		c.mu.Unlock()
		return fmt.Errorf("telegram: the bot was blocked or removed from %s (403: %s): %w", jid, c.redact.Err(err), channel.ErrUndeliverable)
	case errors.As(err, &migrate):
		return fmt.Errorf("telegram: %s became a supergroup: register it again as %s (nanoclawd groups add --jid %s …): %w",
			jid, JID(int64(migrate.MigrateToChatID)), JID(int64(migrate.MigrateToChatID)), channel.ErrUndeliverable)
	case errors.Is(err, tg.ErrorBadRequest), errors.Is(err, tg.ErrorNotFound):
		return fmt.Errorf("telegram: %v: %w", c.redact.Err(err), channel.ErrUndeliverable)
	case errors.Is(err, tg.ErrorUnauthorized):
		c.down(ErrTokenRefused.Error())
		return fmt.Errorf("telegram: %w: %w", ErrTokenRefused, channel.ErrUnavailable)
	case isNetErr(err):
		c.down("cannot reach the Bot API: " + err.Error()) // down redacts it
		return fmt.Errorf("telegram: %v: %w", c.redact.Err(err), channel.ErrUnavailable)
	}
	return fmt.Errorf("telegram: %w", c.redact.Err(err))
}

// isNetErr tells a request that never got the Bot API's answer.
func isNetErr(err error) bool {
	return err != nil && strings.Contains(err.Error(), "error do request")
}
