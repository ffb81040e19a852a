package telegram_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

const keepTyping = "telegram.(*Channel).keepTyping("

// "Typing…" is shown until the answer is sent, whatever the agent does
// after; a chat that refuses it (403) ends it; and none outlives Run: once
// Run has returned, no goroutine of the channel is left to send one.
func TestTypingEnds(t *testing.T) {
	bot := mocktelegram.Start(t, token)
	before := goleak.IgnoreCurrent() // the mock's server
	c := newChannel(t, bot, nil, telegram.Options{})
	stop := run(t, c, &sink{got: make(chan struct{}, 10)})
	ctx := context.Background()
	typed := func(chat string, n int) func([]mocktelegram.Request) bool {
		return func(r []mocktelegram.Request) bool {
			k := 0
			for _, x := range r {
				if x.Chat() == chat && x.Params["action"] == "typing" {
					k++
				}
			}
			return k >= n
		}
	}

	if err := c.SetTyping(ctx, "tg:-1001", true); err != nil {
		t.Fatal(err)
	}
	bot.WaitFor(t, "sendChatAction", 30*time.Second, typed("-1001", 1))
	if err := c.Send(ctx, channel.Outgoing{ID: "1", ChatJID: "tg:-1001", Text: "the answer"}); err != nil {
		t.Fatal(err)
	}
	waitStack(t, keepTyping, false) // ended by the answer, though no "off" came

	bot.FailNext("sendChatAction", mocktelegram.Failure{Code: 403, Description: "Forbidden: bot was kicked from the group chat"})
	c.SetTyping(ctx, "tg:-1002", true)
	bot.WaitFor(t, "sendChatAction", 30*time.Second, typed("-1002", 1))
	waitStack(t, keepTyping, false) // ended by the refusal

	for _, chat := range []string{"tg:-1001", "tg:-1002", "tg:-1003"} {
		c.SetTyping(ctx, chat, true)
	}
	for chat, n := range map[string]int{"-1001": 2, "-1002": 2, "-1003": 1} { // each started again
		bot.WaitFor(t, "sendChatAction", 30*time.Second, typed(chat, n))
	}
	stop()
	if inStack(keepTyping) {
		t.Fatal("typing goes on after Run returned")
	}
	goleak.VerifyNone(t, before) // no goroutine of the channel at all
	n := len(bot.Requests("sendChatAction"))
	c.SetTyping(ctx, "tg:-1004", true) // after Run: nothing to show it
	if inStack(keepTyping) || len(bot.Requests("sendChatAction")) != n {
		t.Error("typing started after Run returned")
	}
}
