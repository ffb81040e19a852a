package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// telegramTokenRE is the shape of every token @BotFather hands out: the
// bot's number, a colon and 35 URL-safe characters (e.g. 123456789:AAH…).
var telegramTokenRE = regexp.MustCompile(`^[0-9]{1,20}:[A-Za-z0-9_-]{35}$`)

// ErrTelegramToken: a token that cannot be a Telegram bot token.
var ErrTelegramToken = errors.New("is not a bot token")

// CheckTelegramToken tells whether token has the shape of a Telegram bot
// token, and if not, what is wrong with it, in words that do not give the
// token away. The config checks channels.telegram.token with it at load,
// and the Telegram channel a token from anywhere else.
func CheckTelegramToken(token string) error {
	if telegramTokenRE.MatchString(token) {
		return nil
	}
	id, secret, ok := strings.Cut(token, ":")
	what := fmt.Sprintf("the part after the colon is %d characters long", len(secret))
	switch {
	case strings.TrimSpace(token) != token:
		what = "it has a space or line break at one end"
	case !ok:
		what = "it has no colon"
	case id == "" || len(id) > 20 || strings.Trim(id, "0123456789") != "":
		what = "the part before the colon is not the bot's number"
	default:
		for i, r := range secret {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
				what = fmt.Sprintf("character %d after the colon is not a letter, digit, _ or -", i+1)
				break
			}
		}
	}
	return fmt.Errorf("%w (%s): a token is the bot's number, a colon and 35 letters, digits, _ or - (e.g. 123456789:AAH…); "+
		"copy it again from @BotFather (/token)", ErrTelegramToken, what)
}
