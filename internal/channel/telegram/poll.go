package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-telegram/bot/models"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// allowedUpdates are the updates asked for: message_reaction is not sent
// unless named.
var allowedUpdates = []string{
	models.AllowedUpdateMessage, models.AllowedUpdateEditedMessage,
	models.AllowedUpdateMessageReaction, models.AllowedUpdateMyChatMember,
}

// Run long-polls Telegram until ctx ends. Each update is handed to sink;
// only when sink stored it does the next getUpdates carry an offset past
// it, which is what tells Telegram it may forget the update. A daemon
// killed in between gets it again; the store drops the repeat.
func (c *Channel) Run(ctx context.Context, sink channel.Sink) error {
	var wait time.Duration
	pause := func(reason string) bool {
		c.down(reason)
		wait = min(max(2*wait, time.Second), 30*time.Second)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
			return true
		}
	}
	for c.me.Load() == nil {
		me, err := c.getMe(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrTokenRefused) {
			c.down(ErrTokenRefused.Error())
			return ErrTokenRefused
		}
		if err != nil {
			c.log.Warn().Err(err).Msg("Telegram getMe failed; trying again")
			if !pause("cannot reach the Bot API: " + err.Error()) {
				return nil
			}
			continue
		}
		c.me.Store(me)
	}
	c.log.Info().Str("bot", "@"+c.me.Load().Username).Msg("Telegram bot connected")
	var offset int64
	for ctx.Err() == nil {
		updates, err := c.getUpdates(ctx, offset)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			c.log.Warn().Err(err).Msg("Telegram getUpdates failed; trying again")
			if errors.Is(err, ErrTokenRefused) {
				c.down(err.Error())
				return err
			}
			if !pause(err.Error()) {
				return nil
			}
			continue
		}
		wait = 0
		c.up()
		for _, u := range updates {
			if err := c.handle(ctx, sink, u); err != nil {
				// Not confirmed: the next getUpdates starts at this one.
				c.log.Error().Err(err).Int64("update", u.ID).Msg("storing a Telegram update failed; it is fetched again")
				if !pause("storing an update failed: " + err.Error()) {
					return nil
				}
				break
			}
			offset = u.ID + 1
		}
	}
	return nil
}

// apiAnswer is the Bot API's envelope of every answer.
type apiAnswer struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter int `json:"retry_after"`
	} `json:"parameters"`
}

// getUpdates asks for the updates from offset on (0: every unconfirmed
// one), waiting up to PollTimeout for the first.
func (c *Channel) getUpdates(ctx context.Context, offset int64) ([]*models.Update, error) {
	body, _ := json.Marshal(map[string]any{
		"offset": offset, "timeout": int(c.opts.PollTimeout / time.Second), "allowed_updates": allowedUpdates,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.APIURL+"/bot"+c.opts.Token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getUpdates: cannot reach %s: %w", c.opts.APIURL, redact(err, c.opts.Token))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", err)
	}
	var a apiAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("getUpdates: %s answered HTTP %d with something that is not the Bot API's JSON", c.opts.APIURL, resp.StatusCode)
	}
	switch {
	case a.OK:
	case a.ErrorCode == http.StatusUnauthorized:
		return nil, ErrTokenRefused
	case a.ErrorCode == http.StatusConflict:
		return nil, fmt.Errorf("%w (%s)", ErrConflict, a.Description)
	case a.ErrorCode == http.StatusTooManyRequests:
		c.floodWait(time.Duration(a.Parameters.RetryAfter) * time.Second)
		return nil, fmt.Errorf("getUpdates: Telegram asks to wait %d s (429)", a.Parameters.RetryAfter)
	default:
		return nil, fmt.Errorf("getUpdates: %d %s", a.ErrorCode, a.Description)
	}
	var updates []*models.Update
	if err := json.Unmarshal(a.Result, &updates); err != nil {
		return nil, fmt.Errorf("getUpdates: the updates do not decode: %w", err)
	}
	return updates, nil
}

// redactedErr hides the bot token, which is part of every request's URL.
type redactedErr struct {
	msg string
	err error
}

func (e redactedErr) Error() string { return e.msg }
func (e redactedErr) Unwrap() error { return e.err }

func redact(err error, token string) error {
	if err == nil || token == "" {
		return err
	}
	return redactedErr{msg: strings.ReplaceAll(err.Error(), token, "<token>"), err: err}
}
