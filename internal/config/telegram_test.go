package config_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/config"
)

// A bot token has the shape @BotFather gives; anything else is refused in
// words that never repeat it.
func TestCheckTelegramToken(t *testing.T) {
	if err := config.CheckTelegramToken("7000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"); err != nil {
		t.Errorf("a token as @BotFather gives it: %v", err)
	}
	for _, bad := range []string{"", "123:abc", " 7000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ", "7000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ=",
		"x:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ", "7000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALD\x01awQ"} {
		if err := config.CheckTelegramToken(bad); !errors.Is(err, config.ErrTelegramToken) || strings.Contains(err.Error(), "AAHdq") {
			t.Errorf("CheckTelegramToken(%q) = %v", bad, err)
		}
	}
}
