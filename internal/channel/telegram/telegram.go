// Package telegram is the Telegram channel: a bot (token from @BotFather)
// that long-polls the Bot API, turns updates into channel.Messages — an
// update's offset confirmed only once its message is stored — and sends
// replies, files, reactions and "typing…" through the outbox.
//
// The Bot API methods are github.com/go-telegram/bot's, typed. Only
// getUpdates is called here directly (poll.go): that library's polling
// loop confirms an offset as soon as an update is handed to a handler, and
// here it must wait until the message is in SQLite.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tg "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// Prefix starts every JID of this channel: tg:<chat id>, and a sender's
// tg:<user id>.
const Prefix = "tg:"

// Sentinel errors.
var (
	// ErrNoToken: the channel is enabled without a token.
	ErrNoToken = errors.New("channels.telegram.enabled is true but there is no bot token: put TELEGRAM_BOT_TOKEN=… (from @BotFather) in nanoclawd.env beside the config, or set channels.telegram.token; 'nanoclawd setup' does it")
	// ErrTokenRefused: Telegram says the token is not a bot's (401).
	ErrTokenRefused = errors.New("Telegram refused the bot token (401 Unauthorized): copy it again from @BotFather (/token) into TELEGRAM_BOT_TOKEN in nanoclawd.env and restart")
	// ErrConflict: another program polls the same bot (409).
	ErrConflict = errors.New("another program is polling this bot (409 Conflict): stop the other program using this bot token " +
		"(a second nanoclawd, another bot framework, a webhook), or give each its own bot")
)

// Options configures a Channel.
type Options struct {
	Token         string
	APIURL        string // e.g. https://api.telegram.org
	AssistantName string
	DB            *store.DB // telegram_chats and telegram_state
	// Trigger is the trigger of the group registered for a chat ("" when
	// there is none or it needs none): a message that names the bot or
	// replies to it gets it in front, so it calls the assistant.
	Trigger func(ctx context.Context, jid string) string
	// Outbox is told when sending works again, and carries what the owner
	// must hear (polling stopped by a 409). Nil: nobody.
	Outbox Outbox
	// Audit records an update given up after maxTries (nil: the log only).
	Audit Audit
	// MaxBytes is the largest file downloaded (media.maxBytes); nil: 20 MiB.
	MaxBytes func() int
	Logger   zerolog.Logger
	// PollTimeout is how long one getUpdates waits for news (50 s when 0).
	PollTimeout time.Duration
	// StoreRetry is the first wait after an update failed to be stored,
	// doubled at each further failure (1 s when 0).
	StoreRetry time.Duration
	// MaxWait bounds how long one Send waits out Telegram's flood control
	// (retry_after) before handing the message back to the outbox (5 min
	// when 0).
	MaxWait time.Duration
}

// Outbox is the daemon's outbox as the channel uses it: told that sending
// may work again, and queueing a notice for the main chat.
type Outbox interface {
	Notify()
	TellMain(ctx context.Context, text string)
}

// Audit records an update that could not be stored and was skipped.
type Audit interface {
	Skipped(ctx context.Context, chatJID string, updateID int64, cause error)
}

// Channel is the Telegram channel; it implements channel.Channel.
type Channel struct {
	opts Options
	log  zerolog.Logger
	http *http.Client
	bot  *tg.Bot

	redact redactor // hides the token in every error shown

	me        atomic.Pointer[models.User]   // the bot, once getMe answered
	mention   atomic.Pointer[regexp.Regexp] // finds @username of the bot (mentionRE), set before me
	connected atomic.Bool
	resume    chan struct{} // Resume's nudge to polling stopped by a 409

	told channel.Told // what the sink knows of each chat: one chat record per message

	mu         sync.Mutex
	state      string               // the status line's reason when not connected
	since      time.Time            // when state (or the connection) began
	blocked    map[string]time.Time // chats that answered 403, since when
	floodUntil time.Time            // no request before this (a 429's retry_after)
	delivered  map[string]int       // parts of split messages Telegram accepted, by outbox ID
	stoppedAt  time.Time            // when a 409 stopped polling, until Resume; zero while it runs

	typing *typing // the chats shown "typing…" (typing.go)
}

var (
	_ channel.Channel  = (*Channel)(nil)
	_ channel.Reporter = (*Channel)(nil)
)

// New returns a Channel; nothing is requested until Run.
func New(opts Options) (*Channel, error) {
	if strings.TrimSpace(opts.Token) == "" {
		return nil, ErrNoToken
	}
	if err := config.CheckTelegramToken(opts.Token); err != nil {
		return nil, fmt.Errorf("telegram: the token (channels.telegram.token, or TELEGRAM_BOT_TOKEN in nanoclawd.env) %w", err)
	}
	if opts.PollTimeout <= 0 {
		opts.PollTimeout = 50 * time.Second
	}
	if opts.StoreRetry <= 0 {
		opts.StoreRetry = time.Second
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 5 * time.Minute
	}
	opts.APIURL = strings.TrimRight(opts.APIURL, "/")
	c := &Channel{
		opts: opts, log: opts.Logger.With().Str("channel", "telegram").Logger(),
		// A long poll holds its request open PollTimeout; the margin is
		// for the answer to arrive.
		http:    &http.Client{Timeout: opts.PollTimeout + 20*time.Second},
		blocked: map[string]time.Time{}, delivered: map[string]int{}, redact: newRedactor(opts.Token),
		state: "starting", since: time.Now(), resume: make(chan struct{}, 1), typing: newTyping(),
	}
	b, err := tg.New(opts.Token, tg.WithServerURL(opts.APIURL), tg.WithSkipGetMe(),
		tg.WithHTTPClient(opts.PollTimeout, c.http), tg.WithErrorsHandler(func(err error) {
			c.log.Debug().Err(c.redact.Err(err)).Msg("bot api")
		}))
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	c.bot = b
	return c, nil
}

// Name implements channel.Channel.
func (c *Channel) Name() string { return "telegram" }

// Owns reports whether jid is a Telegram chat.
func (c *Channel) Owns(jid string) bool {
	_, err := ChatID(jid)
	return err == nil
}

// Connected implements channel.Channel: the last request to Telegram
// worked, and polling was not stopped by a 409.
func (c *Channel) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected.Load() && c.stoppedAt.IsZero()
}

// ChatID is the Telegram chat id of jid ("tg:-100123" → -100123).
func ChatID(jid string) (int64, error) {
	rest, ok := strings.CutPrefix(jid, Prefix)
	if !ok {
		return 0, fmt.Errorf("%q is not a Telegram chat (tg:<chat id>)", jid)
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%q is not a Telegram chat: the part after tg: must be the chat's number id (nanoclawd telegram chats lists them)", jid)
	}
	return id, nil
}

// JID is the chat (or user) id as a JID.
func JID(id int64) string { return Prefix + strconv.FormatInt(id, 10) }

// up records that Telegram answered.
func (c *Channel) up() {
	if !c.connected.Swap(true) {
		c.mu.Lock()
		c.state, c.since = "", time.Now()
		c.mu.Unlock()
		if c.opts.Outbox != nil {
			c.opts.Outbox.Notify()
		}
	}
}

// down records why Telegram cannot be reached.
func (c *Channel) down(reason string) {
	reason = c.redact.String(reason)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.connected.Swap(false) || c.state != reason {
		c.since = time.Now()
	}
	c.state = reason
}

// Status is the channel's line in nanoclawd status: the connection, and
// every chat that refused the bot (403) since.
func (c *Channel) Status() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var line string
	if !c.stoppedAt.IsZero() {
		line = fmt.Sprintf("polling stopped since %s: %v; then 'nanoclawd run' again, or save the config file to make the running daemon try again",
			c.stoppedAt.Local().Format("2006-01-02 15:04:05"), ErrConflict) // Telegram's own words go to the log
	} else if me := c.me.Load(); c.connected.Load() && me != nil {
		line = fmt.Sprintf("connected as @%s since %s", me.Username, c.since.Local().Format("2006-01-02 15:04:05"))
	} else {
		line = fmt.Sprintf("not connected since %s: %s", c.since.Local().Format("2006-01-02 15:04:05"), c.state)
	}
	var chats []string
	for jid, at := range c.blocked {
		chats = append(chats, fmt.Sprintf("%s since %s", jid, at.Local().Format("2006-01-02 15:04")))
	}
	sort.Strings(chats)
	if len(chats) > 0 {
		line += "; the bot was blocked or removed (403) in " + strings.Join(chats, ", ") +
			": add it again, or 'nanoclawd groups remove' the group"
	}
	return line
}
