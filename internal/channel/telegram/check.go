package telegram

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tg "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// GetMe asks Telegram who the bot with token is: the check of a token that
// setup and doctor make. A refused token is ErrTokenRefused.
func GetMe(ctx context.Context, token, apiURL string) (*models.User, error) {
	if token == "" {
		return nil, ErrNoToken
	}
	c, err := New(Options{Token: token, APIURL: apiURL, PollTimeout: time.Second})
	if err != nil {
		return nil, err
	}
	return c.getMe(ctx)
}

func (c *Channel) getMe(ctx context.Context) (*models.User, error) {
	me, err := c.bot.GetMe(ctx)
	switch {
	case errors.Is(err, tg.ErrorUnauthorized), errors.Is(err, tg.ErrorNotFound):
		// An unknown token is 401, a malformed one 404.
		return nil, ErrTokenRefused
	case err != nil:
		return nil, fmt.Errorf("cannot ask %s who the bot is: %w", c.opts.APIURL, c.redact.Err(err))
	}
	return me, nil
}

// ProbePolling makes one getUpdates that waits for nothing and confirms
// nothing: ErrConflict when another program polls the bot (or a webhook is
// set). Only while no nanoclawd of this install polls — it would be the
// other program.
func ProbePolling(ctx context.Context, token, apiURL string) error {
	c, err := New(Options{Token: token, APIURL: apiURL, PollTimeout: time.Second})
	if err != nil {
		return err
	}
	_, err = c.getUpdatesNoWait(ctx, 0)
	return err
}

// WaitForCode polls the bot until a message holding code arrives, and
// returns its chat and sender: how setup learns which chat becomes main
// and who the owner is. What it reads is confirmed, as the daemon would;
// it runs before any chat is registered, so no group misses a message.
func WaitForCode(ctx context.Context, token, apiURL, code string) (chat models.Chat, user *models.User, err error) {
	c, err := New(Options{Token: token, APIURL: apiURL, PollTimeout: 10 * time.Second})
	if err != nil {
		return chat, nil, err
	}
	var offset int64
	for {
		if err := c.waitFlood(ctx); err != nil {
			return chat, nil, err
		}
		updates, err := c.getUpdates(ctx, offset)
		if ctx.Err() != nil {
			return chat, nil, ctx.Err()
		}
		if c.flooded(err) {
			continue
		}
		if err != nil {
			return chat, nil, err
		}
		for _, u := range updates {
			offset = u.id + 1
			if m := u.Message; u.err == nil && m != nil && m.From != nil && strings.Contains(m.Text, code) {
				// Confirm it, so the daemon does not take the code for a message.
				_, _ = c.getUpdatesNoWait(ctx, offset)
				return m.Chat, m.From, nil
			}
		}
	}
}

func (c *Channel) getUpdatesNoWait(ctx context.Context, offset int64) ([]update, error) {
	saved := c.opts.PollTimeout
	c.opts.PollTimeout = 0
	defer func() { c.opts.PollTimeout = saved }()
	return c.getUpdates(ctx, offset)
}
