package doctor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/doctor"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

// doctor's Telegram check against a mock Bot API: the bot's name from
// getMe, a refused token, and another program polling (409 Conflict).
func TestTelegramCheck(t *testing.T) {
	bot := mocktelegram.Start(t, "42:good")
	cfg := config.Default()
	cfg.Channels.Telegram = config.Telegram{Enabled: true, Token: "42:good", APIURL: bot.URL}
	ctx := context.Background()

	if r := doctor.Telegram(ctx, &cfg, 0); !r.OK || !strings.Contains(r.Detail, "@"+mocktelegram.BotUsername) || !strings.Contains(r.Detail, "no other program") {
		t.Errorf("a good token: %s", r)
	}
	bot.Conflict(true)
	if r := doctor.Telegram(ctx, &cfg, 0); r.OK || !strings.Contains(r.Detail, "409 Conflict") {
		t.Errorf("another poller: %s", r)
	}
	if r := doctor.Telegram(ctx, &cfg, 1234); !r.OK || !strings.Contains(r.Detail, "the running daemon polls it") {
		t.Errorf("with the daemon running (it is the poller): %s", r)
	}
	cfg.Channels.Telegram.Token = "42:bad"
	if r := doctor.Telegram(ctx, &cfg, 0); r.OK || !strings.Contains(r.Detail, "refused the bot token") {
		t.Errorf("a refused token: %s", r)
	}
	t.Setenv(config.TelegramTokenEnv, "")
	cfg.Channels.Telegram.Token = ""
	if r := doctor.Telegram(ctx, &cfg, 0); r.OK || !strings.Contains(r.Detail, "TELEGRAM_BOT_TOKEN") {
		t.Errorf("no token: %s", r)
	}
	cfg.Channels.Telegram.Enabled = false
	if r := doctor.Telegram(ctx, &cfg, 0); !r.OK || !strings.Contains(r.Detail, "disabled") {
		t.Errorf("disabled: %s", r)
	}
}
