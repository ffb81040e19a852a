package setup_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

// Setup with a Telegram main chat, against a mock Bot API: a wrong token
// is refused (getMe), the right one saved 0600 in nanoclawd.env, the
// channel turned on in the config file, and the chat the one-time code
// came from registered as main, its sender kept as the owner.
func TestTelegramMainChat(t *testing.T) {
	bot := mocktelegram.Start(t, "42:AAright-right_right-right_right-riX")
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant-api03-x"}
	g, out := newGuide(t, false, false, "2\n42:wrong\n42:AAright-right_right-right_right-riX\n", env, "")
	g.Config.Channels.Telegram.APIURL = bot.URL
	g.TelegramCode = "nc-test1234"
	db, err := store.Open(g.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g.DB = db
	group := mocktelegram.Group(-100555, "Owners")
	bot.Push(map[string]any{"message": bot.Message(group, mocktelegram.User(31337, "Olga"), "/start@"+mocktelegram.BotUsername+" nc-test1234", nil)})
	ctx := context.Background()
	if err := g.Run(ctx, false); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m, err := g.Groups.Main(ctx)
	if err != nil || m.JID != "tg:-100555" || m.Name != "Owners" || m.Folder != "main" {
		t.Fatalf("main: %+v %v\n%s", m, err, out)
	}
	if owner, err := telegram.Owner(ctx, db); err != nil || owner != 31337 {
		t.Errorf("owner = %d, %v; want the code's sender 31337", owner, err)
	}
	fi, err := os.Stat(g.Cred.EnvFile)
	data, _ := os.ReadFile(g.Cred.EnvFile)
	if err != nil || fi.Mode().Perm() != 0o600 || !strings.Contains(string(data), config.TelegramTokenEnv+"=42:AAright-right_right-right_right-riX\n") {
		t.Errorf("nanoclawd.env: %v %v %q", err, fi.Mode().Perm(), data)
	}
	cfg, err := config.Load(g.Config.File)
	if err != nil || !cfg.Channels.Telegram.Enabled || cfg.Channels.WhatsApp.Enabled {
		t.Errorf("the config file does not turn Telegram on and the unchosen WhatsApp off: %v", err)
	}
	for _, want := range []string{"That token does not work", "the token is the bot @" + mocktelegram.BotUsername, "nc-test1234", `send this in the Telegram chat "Owners"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
}
