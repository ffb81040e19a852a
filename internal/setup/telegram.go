package setup

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
)

// telegramMain makes a Telegram chat the main chat: the bot's token
// (checked with getMe, saved in nanoclawd.env), the channel turned on, and
// a one-time code the owner sends to the bot from the chat that should be
// main. Its sender becomes the default approver. nil, nil: skipped.
func (g *Guide) telegramMain(ctx context.Context) (*groups.Group, error) {
	t := g.Config.Channels.Telegram
	token := t.BotToken()
	for {
		if token == "" {
			restore := func() {}
			if g.NoEcho != nil {
				restore = g.NoEcho()
			}
			fmt.Fprintln(g.Out, "Create a bot with @BotFather in Telegram (/newbot) and paste its token here (nothing is shown), or press Enter to skip.")
			a, err := g.ask(ctx, "Bot token: ")
			restore()
			if err != nil {
				return nil, err
			}
			if a == "" {
				return nil, nil
			}
			token = a
		}
		me, err := telegram.GetMe(ctx, token, t.APIURL)
		if err == nil {
			fmt.Fprintf(g.Out, "✓ Telegram: the token is the bot @%s\n", me.Username)
			if err := g.saveTelegram(token); err != nil {
				return nil, err
			}
			return g.awaitCode(ctx, token, t.APIURL, me.Username)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		fmt.Fprintf(g.Out, "That token does not work: %v\n", err)
		token = ""
	}
}

// saveTelegram keeps the token in nanoclawd.env (0600) unless the config
// names one, and turns the channel on in the config file.
func (g *Guide) saveTelegram(token string) error {
	if g.Config.Channels.Telegram.Token == "" && g.Cred.Getenv(config.TelegramTokenEnv) != token {
		if err := g.Cred.Save(config.TelegramTokenEnv, token); err != nil {
			return fmt.Errorf("save the bot token: %w", err)
		}
		if g.Cred.Setenv != nil {
			g.Cred.Setenv(config.TelegramTokenEnv, token)
		}
		fmt.Fprintf(g.Out, "✓ Telegram: token saved in %s (mode 0600)\n", g.Cred.EnvFile)
	}
	if g.Config.Channels.Telegram.Enabled {
		return nil
	}
	cfg, err := config.Set(g.Config.File, "channels.telegram.enabled", true)
	if err != nil {
		return fmt.Errorf("turn the Telegram channel on: %w", err)
	}
	*g.Config = *cfg
	g.TelegramOnNow = true
	fmt.Fprintf(g.Out, "✓ Telegram: channel on in %s\n", g.Config.File)
	return nil
}

// awaitCode shows a one-time code and waits for it to arrive from the
// chat that becomes main.
func (g *Guide) awaitCode(ctx context.Context, token, apiURL, bot string) (*groups.Group, error) {
	code := g.TelegramCode
	if code == "" {
		code = "nc-" + strings.ToLower(rand.Text()[:8])
	}
	fmt.Fprintf(g.Out, "Now send this to @%s from the chat that should be main (a private chat with the bot, or a group it is in):\n  %s\n"+
		"In a group with the bot's privacy mode on, send: /start@%s %s\nWaiting for it (Ctrl-C to stop; no nanoclawd may poll the bot meanwhile)…\n", bot, code, bot, code)
	chat, user, err := telegram.WaitForCode(ctx, token, apiURL, code)
	if errors.Is(err, telegram.ErrConflict) {
		return nil, fmt.Errorf("%w; stop the running nanoclawd and run '%s' again", err, g.cmd("setup"))
	}
	if err != nil {
		return nil, err
	}
	if g.DB != nil {
		if err := telegram.SetOwner(ctx, g.DB, user.ID); err != nil {
			return nil, err
		}
	}
	name := strings.TrimSpace(chat.Title)
	if name == "" {
		name = "Main (Telegram)"
	}
	fmt.Fprintf(g.Out, "✓ Telegram: the code came from %s (tg:%d); %s (tg:%d) may answer alerts\n", name, chat.ID, user.FirstName, user.ID)
	return &groups.Group{JID: telegram.JID(chat.ID), Name: name}, nil
}
