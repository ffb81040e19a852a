package telegram

import (
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
	c.mu.Lock()
	delete(c.blocked, m.ChatJID)
	delete(c.delivered, m.ID)
	c.mu.Unlock()
	return nil
}

// sendText sends the parts of text Telegram has not accepted yet (a retry
// after a failure in the middle does not repeat the first parts).
func (c *Channel) sendText(ctx context.Context, chat int64, id, text string) error {
	parts := splitText(text, maxText)
	c.mu.Lock()
	done := c.delivered[id]
	c.mu.Unlock()
	for i := done; i < len(parts); i++ {
		if err := c.call(ctx, func() error { return c.sendHTML(ctx, chat, parts[i]) }); err != nil {
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

// sendFile sends an image as a photo and anything else as a document; a
// caption longer than Telegram takes follows as a message of its own.
func (c *Channel) sendFile(ctx context.Context, chat int64, m channel.Outgoing) error {
	data, err := os.ReadFile(m.File.Path)
	if err != nil {
		return fmt.Errorf("the file to send is gone: %w: %w", err, channel.ErrUndeliverable)
	}
	caption, rest := m.Text, ""
	if width(caption) > maxCaption {
		caption, rest = "", m.Text
	}
	c.mu.Lock()
	done := c.delivered[m.ID]
	c.mu.Unlock()
	if done == 0 {
		photo := strings.HasPrefix(m.File.MIME, "image/") && m.File.MIME != "image/gif" && m.File.MIME != "image/svg+xml"
		err = c.call(ctx, func() error {
			upload := &models.InputFileUpload{Filename: m.File.Name, Data: strings.NewReader(string(data))}
			var err error
			if photo {
				_, err = c.bot.SendPhoto(ctx, &tg.SendPhotoParams{ChatID: chat, Photo: upload, Caption: ToHTML(caption), ParseMode: models.ParseModeHTML})
			} else {
				_, err = c.bot.SendDocument(ctx, &tg.SendDocumentParams{ChatID: chat, Document: upload, Caption: ToHTML(caption), ParseMode: models.ParseModeHTML})
			}
			return err
		})
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.delivered[m.ID] = 1
		c.mu.Unlock()
	}
	if rest == "" {
		return nil
	}
	return c.call(ctx, func() error { return c.sendHTML(ctx, chat, rest) })
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
		var flood *tg.TooManyRequestsError
		if !errors.As(err, &flood) {
			if err == nil || !isNetErr(err) {
				c.up()
			}
			return err
		}
		wait := time.Duration(max(flood.RetryAfter, 1)) * time.Second
		c.log.Warn().Dur("retry_after", wait).Msg("Telegram flood control: waiting before sending again")
		c.floodWait(wait)
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("Telegram asks to wait %s before sending (429): %w", wait, channel.ErrUnavailable)
		}
	}
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
		return fmt.Errorf("telegram: the bot was blocked or removed from %s (403: %s): %w", jid, redact(err, c.opts.Token), channel.ErrUndeliverable)
	case errors.As(err, &migrate):
		return fmt.Errorf("telegram: %s became a supergroup: register it again as %s (nanoclawd groups add --jid %s …): %w",
			jid, JID(int64(migrate.MigrateToChatID)), JID(int64(migrate.MigrateToChatID)), channel.ErrUndeliverable)
	case errors.Is(err, tg.ErrorBadRequest), errors.Is(err, tg.ErrorNotFound):
		return fmt.Errorf("telegram: %v: %w", redact(err, c.opts.Token), channel.ErrUndeliverable)
	case errors.Is(err, tg.ErrorUnauthorized):
		c.down(ErrTokenRefused.Error())
		return fmt.Errorf("telegram: %w: %w", ErrTokenRefused, channel.ErrUnavailable)
	case isNetErr(err):
		c.down("cannot reach the Bot API: " + redact(err, c.opts.Token).Error())
		return fmt.Errorf("telegram: %v: %w", redact(err, c.opts.Token), channel.ErrUnavailable)
	}
	return fmt.Errorf("telegram: %w", redact(err, c.opts.Token))
}

// isNetErr tells a request that never got the Bot API's answer.
func isNetErr(err error) bool {
	return err != nil && strings.Contains(err.Error(), "error do request")
}

// typingEvery renews "typing…": Telegram shows it for 5 s or until the
// next message.
const typingEvery = 4 * time.Second

// SetTyping implements channel.Channel: "typing…" is renewed until turned
// off.
func (c *Channel) SetTyping(ctx context.Context, jid string, on bool) error {
	chat, err := ChatID(jid)
	if err != nil {
		return err
	}
	c.typingMu.Lock()
	defer c.typingMu.Unlock()
	if stop, ok := c.typing[jid]; ok {
		if on {
			return nil
		}
		close(stop)
		delete(c.typing, jid)
		return nil
	}
	if !on {
		return nil
	}
	stop := make(chan struct{})
	c.typing[jid] = stop
	go func() {
		t := time.NewTicker(typingEvery)
		defer t.Stop()
		for {
			c.mu.Lock()
			flooded := time.Now().Before(c.floodUntil)
			c.mu.Unlock()
			if !flooded { // under flood control the replies go first
				rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := c.bot.SendChatAction(rctx, &tg.SendChatActionParams{ChatID: chat, Action: models.ChatActionTyping})
				cancel()
				if err != nil {
					c.log.Debug().Err(redact(err, c.opts.Token)).Str("chat", jid).Msg("typing")
				}
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return nil
}
