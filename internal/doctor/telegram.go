package doctor

import (
	"context"
	"errors"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/status"
)

// Telegram checks the bot token with getMe and, while no daemon of this
// install runs (which would be the poller), that no other program polls
// the same bot: Telegram serves one getUpdates at a time (409 Conflict).
// running is the running daemon's report, nil when it gave none.
func Telegram(ctx context.Context, cfg *config.Config, daemonPID int, running *status.Report) Result {
	t := cfg.Channels.Telegram
	if !t.Enabled {
		return ok("telegram", "disabled (channels.telegram.enabled is false)")
	}
	token := t.BotToken()
	if token == "" {
		return fix("telegram", "%v", telegram.ErrNoToken)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	me, err := telegram.GetMe(ctx, token, t.APIURL)
	if err != nil {
		return fix("telegram", "%v", err)
	}
	if daemonPID > 0 {
		// The running daemon is the poller: its own line says how that goes
		// (a 409 stops it, with the fix).
		var chans []status.Channel
		if running != nil {
			chans = running.Channels
		}
		for _, ch := range chans {
			if ch.Name == "telegram" && !ch.Connected {
				return fix("telegram", "bot @%s; the running daemon: %s", me.Username, ch.State)
			}
		}
		return ok("telegram", "bot @%s; the running daemon polls it", me.Username)
	}
	switch err := telegram.ProbePolling(ctx, token, t.APIURL); {
	case errors.Is(err, telegram.ErrConflict):
		return fix("telegram", "bot @%s: %v", me.Username, err)
	case err != nil:
		r := ok("telegram", "bot @%s; polling not checked: %v", me.Username, err)
		r.Unchecked = true
		return r
	}
	return ok("telegram", "bot @%s; no other program polls it", me.Username)
}
