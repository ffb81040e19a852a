package telegram

import (
	"context"
	"errors"
	"sync"
	"time"

	tg "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// Telegram shows "typing…" for 5 s, or until the bot's next message in
// the chat: it is renewed every typingEvery, and never past typingMax
// should the "off" never come.
const (
	typingEvery = 4 * time.Second
	typingMax   = time.Hour
)

// typing is the chats shown "typing…", each renewed by a goroutine of its
// own. They live as long as the channel: from New until Run returns,
// when close ends them all and waits, so none outlives it.
type typing struct {
	mu     sync.Mutex
	ctx    context.Context // nil once closed: nothing is shown then
	cancel context.CancelFunc
	chats  map[string]chan struct{}
	wg     sync.WaitGroup
}

func newTyping() *typing {
	ctx, cancel := context.WithCancel(context.Background())
	return &typing{ctx: ctx, cancel: cancel, chats: map[string]chan struct{}{}}
}

// close stops every renewal and waits for them.
func (t *typing) close() {
	t.mu.Lock()
	t.ctx = nil
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}

// stop ends the renewal in jid, if one runs.
func (t *typing) stop(jid string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if stop, ok := t.chats[jid]; ok {
		close(stop)
		delete(t.chats, jid)
	}
}

// drop forgets jid's renewal that ended by itself, unless a new one took
// its place.
func (t *typing) drop(jid string, stop chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.chats[jid] == stop {
		delete(t.chats, jid)
	}
}

// SetTyping implements channel.Channel: "typing…" is renewed until turned
// off, until a message is sent to the chat (Send), or until the channel
// stops.
func (c *Channel) SetTyping(_ context.Context, jid string, on bool) error {
	chat, err := ChatID(jid)
	if err != nil {
		return err
	}
	if !on {
		c.typing.stop(jid)
		return nil
	}
	t := c.typing
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.chats[jid]; ok || t.ctx == nil {
		return nil
	}
	stop := make(chan struct{})
	t.chats[jid] = stop
	t.wg.Add(1)
	go func(ctx context.Context) {
		defer t.wg.Done()
		c.keepTyping(ctx, jid, chat, stop)
	}(t.ctx)
	return nil
}

// keepTyping sends "typing" to chat now and every typingEvery until stop
// closes or ctx ends. Under flood control the replies go first; a chat
// that refuses the bot (403, 400) ends it.
func (c *Channel) keepTyping(ctx context.Context, jid string, chat int64, stop chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, typingMax)
	defer cancel()
	defer c.typing.drop(jid, stop) // at typingMax or a refusal: the next SetTyping starts again
	tick := time.NewTicker(typingEvery)
	defer tick.Stop()
	for {
		if c.waitFlood(ctx) != nil {
			return
		}
		select {
		case <-stop:
			return
		default:
		}
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.bot.SendChatAction(rctx, &tg.SendChatActionParams{ChatID: chat, Action: models.ChatActionTyping})
		rcancel()
		switch {
		case err == nil, c.flooded(err), isNetErr(err), ctx.Err() != nil:
		case errors.Is(err, tg.ErrorForbidden), errors.Is(err, tg.ErrorBadRequest), errors.Is(err, tg.ErrorNotFound):
			c.log.Debug().Err(c.redact.Err(err)).Str("chat", jid).Msg("typing refused; not shown again until the next run")
			return
		default:
			c.log.Debug().Err(c.redact.Err(err)).Str("chat", jid).Msg("typing")
		}
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
