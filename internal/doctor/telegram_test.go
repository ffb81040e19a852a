package doctor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/doctor"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

// doctor's Telegram check against a mock Bot API: the bot's name from
// getMe, a refused token, another program polling (409 Conflict), and a
// running daemon whose polling a 409 stopped.
func TestTelegramCheck(t *testing.T) {
	const good = "42:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"
	bot := mocktelegram.Start(t, good)
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Channels.Telegram = config.Telegram{Enabled: true, Token: good, APIURL: bot.URL}
	ctx := context.Background()

	if r := doctor.Telegram(ctx, &cfg, 0, nil); !r.OK || !strings.Contains(r.Detail, "@"+mocktelegram.BotUsername) || !strings.Contains(r.Detail, "no other program") {
		t.Errorf("a good token: %s", r)
	}
	bot.Conflict(true)
	if r := doctor.Telegram(ctx, &cfg, 0, nil); r.OK || !strings.Contains(r.Detail, "409 Conflict") {
		t.Errorf("another poller: %s", r)
	}
	if r := doctor.Telegram(ctx, &cfg, 1234, nil); !r.OK || !strings.Contains(r.Detail, "the running daemon polls it") {
		t.Errorf("with the daemon running (it is the poller): %s", r)
	}
	// The daemon's own line, when it says its Telegram is down.
	stopped := &status.Report{Channels: []status.Channel{{Name: "telegram", State: "polling stopped since …: 409 Conflict: stop the other program"}}}
	if r := doctor.Telegram(ctx, &cfg, 1234, stopped); r.OK || !strings.Contains(r.Detail, "the running daemon: polling stopped since …: 409 Conflict: stop the other program") {
		t.Errorf("with the daemon's polling stopped: %s", r)
	}
	cfg.Channels.Telegram.Token = "42:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawX" // well formed, not the bot's
	if r := doctor.Telegram(ctx, &cfg, 0, nil); r.OK || !strings.Contains(r.Detail, "refused the bot token") {
		t.Errorf("a refused token: %s", r)
	}
	t.Setenv(config.TelegramTokenEnv, "")
	cfg.Channels.Telegram.Token = ""
	if r := doctor.Telegram(ctx, &cfg, 0, nil); r.OK || !strings.Contains(r.Detail, "TELEGRAM_BOT_TOKEN") {
		t.Errorf("no token: %s", r)
	}
	cfg.Channels.Telegram.Enabled = false
	if r := doctor.Telegram(ctx, &cfg, 0, nil); !r.OK || !strings.Contains(r.Detail, "disabled") {
		t.Errorf("disabled: %s", r)
	}
}
