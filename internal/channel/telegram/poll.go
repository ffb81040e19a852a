package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	tg "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// allowedUpdates are the updates asked for: message_reaction is not sent
// unless named.
var allowedUpdates = []string{
	models.AllowedUpdateMessage, models.AllowedUpdateEditedMessage,
	models.AllowedUpdateMessageReaction, models.AllowedUpdateMyChatMember,
}

// maxTries is how often an update is fetched and fails to be stored before
// it is skipped: one update that can never be stored must not hold back
// every message after it.
const maxTries = 5

// Run long-polls Telegram until ctx ends. Each update is handed to sink;
// only when sink stored it does the next getUpdates carry an offset past
// it, which is what tells Telegram it may forget the update. A daemon
// killed in between gets it again; the store drops the repeat. Once Run
// has returned, no "typing…" is sent: the channel is done.
func (c *Channel) Run(ctx context.Context, sink channel.Sink) error {
	defer c.http.CloseIdleConnections()
	defer c.typing.close()
	reach := backoff{first: time.Second}
	for c.me.Load() == nil {
		if c.waitFlood(ctx) != nil {
			return nil
		}
		me, err := c.getMe(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrTokenRefused):
			c.down(ErrTokenRefused.Error())
			return ErrTokenRefused
		case c.flooded(err):
			continue
		case err != nil:
			c.log.Warn().Err(err).Msg("Telegram getMe failed; trying again")
			c.down("cannot reach the Bot API: " + err.Error())
			if !reach.pause(ctx) {
				return nil
			}
			continue
		}
		if me.Username != "" {
			c.mention.Store(mentionRE(me.Username))
		}
		c.me.Store(me)
	}
	c.log.Info().Str("bot", "@"+c.me.Load().Username).Msg("Telegram bot connected")
	return c.poll(ctx, sink)
}

// poll is Run's loop once the bot knows who it is.
func (c *Channel) poll(ctx context.Context, sink channel.Sink) error {
	var offset int64
	reach, store := backoff{first: time.Second}, backoff{first: c.opts.StoreRetry}
	tries := map[int64]int{} // failed stores of the update at the offset
	for ctx.Err() == nil {
		if c.waitFlood(ctx) != nil {
			return nil
		}
		updates, err := c.getUpdates(ctx, offset)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
		case errors.Is(err, ErrTokenRefused):
			c.down(err.Error())
			return err
		case errors.Is(err, ErrConflict):
			if !c.stop(ctx, err) {
				return nil
			}
			continue
		case c.flooded(err):
			continue // waited out at the top
		default:
			c.log.Warn().Err(err).Msg("Telegram getUpdates failed; trying again")
			c.down(err.Error())
			if !reach.pause(ctx) {
				return nil
			}
			continue
		}
		reach.reset()
		c.polling()
		for _, u := range updates {
			err := u.err
			if err == nil {
				err = c.handle(ctx, sink, u.Update)
			}
			if err != nil && ctx.Err() != nil {
				return nil // cut short by the shutdown, not a failure of the update
			}
			if err != nil && !c.skip(ctx, u, err, tries) {
				// Not confirmed: the next getUpdates starts at this one.
				if !store.pause(ctx) {
					return nil
				}
				break
			}
			delete(tries, u.id)
			store.reset()
			offset = u.id + 1
		}
	}
	return nil
}

// skip counts a failed store of u and tells whether to give it up: at the
// maxTries-th failure it is logged and audited, naming the update and its
// chat, and the updates after it go on.
func (c *Channel) skip(ctx context.Context, u update, err error, tries map[int64]int) bool {
	tries[u.id]++
	jid := ""
	if u.chat != 0 {
		jid = JID(u.chat)
	}
	ev := c.log.Error().Err(c.redact.Err(err)).Int64("update_id", u.id).Str("chat", jid)
	if tries[u.id] < maxTries {
		ev.Int("try", tries[u.id]).Msg("storing a Telegram update failed; it is fetched again")
		c.down("storing an update failed: " + err.Error())
		return false
	}
	ev.Int("tries", tries[u.id]).Msg("a Telegram update could not be stored and is skipped")
	if c.opts.Audit != nil {
		c.opts.Audit.Skipped(ctx, jid, u.id, c.redact.Err(err))
	}
	return true
}

// stop holds polling after a 409 until Resume (a config reload) or ctx
// ends; the owner hears of it once per stop, however many retries meet
// the 409 again.
func (c *Channel) stop(ctx context.Context, err error) bool {
	c.mu.Lock()
	again := !c.stoppedAt.IsZero()
	if !again {
		c.stoppedAt = time.Now()
	}
	c.mu.Unlock()
	if !again {
		c.log.Error().Err(c.redact.Err(err)).Msg("Telegram polling stopped; 'nanoclawd run' again or a config reload tries again")
		if c.opts.Outbox != nil {
			c.opts.Outbox.TellMain(ctx, fmt.Sprintf("[TELEGRAM] Polling stopped: %v. No Telegram message reaches the assistant until then; "+
				"after that, run 'nanoclawd run' again, or save the config file to make the running daemon try again.", ErrConflict))
		}
	}
	select { // a nudge from before this stop is not an answer to it
	case <-c.resume:
	default:
	}
	select {
	case <-ctx.Done():
		return false
	case <-c.resume:
		c.log.Info().Msg("Telegram polling tries again")
		return true
	}
}

// Resume asks polling stopped by a 409 to try again: the daemon calls it on
// a config reload.
func (c *Channel) Resume() {
	select {
	case c.resume <- struct{}{}:
	default:
	}
}

// polling records that getUpdates works (again, after a 409).
func (c *Channel) polling() {
	c.mu.Lock()
	was := c.stoppedAt
	c.stoppedAt = time.Time{}
	c.mu.Unlock()
	if !was.IsZero() {
		c.log.Info().Msg("Telegram polling works again")
	}
	c.up()
}

// backoff is the growing wait between failed attempts: first, twice
// that, … at most 30 s.
type backoff struct{ first, wait time.Duration }

func (b *backoff) reset() { b.wait = 0 }

func (b *backoff) pause(ctx context.Context) bool {
	b.wait = min(max(2*b.wait, b.first), 30*time.Second)
	t := time.NewTimer(b.wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
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

// update is one of getUpdates' results: its id, its chat when known, and
// the update, or why it does not decode.
type update struct {
	id   int64
	chat int64
	*models.Update
	err error
}

// getUpdates asks for the updates from offset on (0: every unconfirmed
// one), waiting up to PollTimeout for the first. Each update is decoded
// on its own, so one that does not decode is one to skip, not a batch
// that never passes.
func (c *Channel) getUpdates(ctx context.Context, offset int64) ([]update, error) {
	body, _ := json.Marshal(map[string]any{
		"offset": offset, "timeout": int(c.opts.PollTimeout / time.Second), "allowed_updates": allowedUpdates,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.APIURL+"/bot"+c.opts.Token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", c.redact.Err(err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getUpdates: cannot reach %s: %w", c.opts.APIURL, c.redact.Err(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("getUpdates: %w", c.redact.Err(err))
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
		return nil, fmt.Errorf("%w (Telegram: %s)", ErrConflict, a.Description)
	case a.ErrorCode == http.StatusTooManyRequests:
		return nil, &tg.TooManyRequestsError{Message: "getUpdates: " + a.Description, RetryAfter: a.Parameters.RetryAfter}
	default:
		return nil, fmt.Errorf("getUpdates: %d %s", a.ErrorCode, a.Description)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(a.Result, &raws); err != nil {
		return nil, fmt.Errorf("getUpdates: the result is not a list of updates: %w", err)
	}
	out := make([]update, 0, len(raws))
	for _, r := range raws {
		u := decodeUpdate(r)
		if u.id == 0 {
			return nil, fmt.Errorf("getUpdates: an update without an update_id: %w", u.err)
		}
		out = append(out, u)
	}
	return out, nil
}

// decodeUpdate decodes one update; one that does not decode still names
// its id and, where it can be read, its chat.
func decodeUpdate(raw json.RawMessage) update {
	type chatOf struct {
		Chat struct {
			ID int64 `json:"id"`
		} `json:"chat"`
	}
	var head struct {
		ID              int64   `json:"update_id"`
		Message         *chatOf `json:"message"`
		EditedMessage   *chatOf `json:"edited_message"`
		MessageReaction *chatOf `json:"message_reaction"`
		MyChatMember    *chatOf `json:"my_chat_member"`
	}
	// Best effort: a field of the wrong type leaves the others read.
	_ = json.Unmarshal(raw, &head)
	u := update{id: head.ID}
	for _, m := range []*chatOf{head.Message, head.EditedMessage, head.MessageReaction, head.MyChatMember} {
		if m != nil && u.chat == 0 {
			u.chat = m.Chat.ID
		}
	}
	u.Update = new(models.Update)
	if err := json.Unmarshal(raw, u.Update); err != nil {
		u.err = fmt.Errorf("update %d does not decode: %w", u.id, err)
	}
	return u
}
