package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

// A bot whose @username starts with the assistant's name is called by it
// in a group; "typing…" ends with the answer though the agent stays for
// follow-ups; a 429 with retry_after on getUpdates is waited out, not
// hammered (the mock answers 429 again to a poll that comes too soon).
func TestTelegramTypingMentionFlood(t *testing.T) {
	in, bot := telegramInstall(t)
	bot.SetUsername("andy_test_bot")
	in.Start()
	group := mocktelegram.Group(tgGroup, "Family")
	alice := mocktelegram.User(77, "Alice")
	chat := strconv.FormatInt(tgGroup, 10)

	// "followup" answers "ready" and stays for follow-ups (the idle timeout is a minute).
	bot.Push(map[string]any{"message": bot.Message(group, alice, "@andy_test_bot followup", nil)})
	reqs := bot.WaitFor(t, "sendMessage", 90*time.Second, anySent(tgGroup, func(s string) bool { return s == "ready" }))
	answered := reqs[len(reqs)-1].Time
	typing := func() (before, after []time.Time) {
		for _, r := range bot.Requests("sendChatAction") {
			if r.Chat() == chat && r.Time.Before(answered) {
				before = append(before, r.Time)
			} else if r.Chat() == chat {
				after = append(after, r.Time)
			}
		}
		return before, after
	}
	// Long enough for the old renewal every 4 s to show twice.
	bot.WaitFor(t, "", time.Minute, func([]mocktelegram.Request) bool { return time.Since(answered) > 10*time.Second })
	before, after := typing()
	if len(before) == 0 {
		t.Error("no typing was shown while the agent worked")
	}
	for _, at := range after {
		if at.Sub(answered) > 2*time.Second {
			t.Errorf("typing sent %s after the answer", at.Sub(answered).Round(time.Millisecond))
		}
	}

	bot.FailNext("getUpdates", mocktelegram.Failure{Code: 429, Description: "Too Many Requests: retry after 3", RetryAfter: 3})
	bot.Push(map[string]any{"message": bot.Message(group, alice, "@Andy echo after the flood", nil)})
	bot.WaitFor(t, "sendMessage", 90*time.Second, anySent(tgGroup, func(s string) bool {
		return strings.HasPrefix(s, "followup: ") && strings.Contains(s, "@Andy echo after the flood") // handed to the waiting agent
	}))
	n := 0
	for _, p := range bot.Polls() {
		if p.Answered == 429 {
			n++
		}
	}
	if n != 1 {
		t.Errorf("getUpdates was answered 429 %d times; want once (a poll before retry_after passed gets 429 again)", n)
	}
}

// An update that never stores (it does not decode) is skipped after five
// tries, audited and logged by update_id and chat, and the next message is
// answered. A 409 (another program polls the bot) stops polling: the main
// chat is told once, status and doctor say so with the fix, and a save of
// the config file tries again — told no second time while the other
// program still polls, and polling again once it stopped.
func TestTelegramPoisonAndConflict(t *testing.T) {
	in, bot := telegramInstall(t)
	in.Start()
	group := mocktelegram.Group(tgGroup, "Family")
	alice := mocktelegram.User(77, "Alice")
	wait := 90 * time.Second

	poison := bot.Push(map[string]any{"message": map[string]any{"message_id": 9, "date": "yesterday", "chat": group, "from": alice, "text": "@Andy echo poison"}})
	bot.Push(map[string]any{"message": bot.Message(group, alice, "@Andy echo after the poison", nil)})
	bot.WaitFor(t, "sendMessage", wait, anySent(tgGroup, func(s string) bool { return s == "echo: after the poison" }))
	var audit []struct{ Group, Kind, Tool, Target, Detail string }
	if err := json.Unmarshal([]byte(in.CLI("violations", "--json")), &audit); err != nil {
		t.Fatal(err)
	}
	target := fmt.Sprintf("update %d of tg:%d", poison, tgGroup)
	if len(audit) != 1 || audit[0].Group != "family" || audit[0].Tool != "telegram" || audit[0].Target != target {
		t.Errorf("the audit trail: %+v; want the skipped %s", audit, target)
	}
	if log, _ := os.ReadFile(in.Layout().DaemonLog()); !strings.Contains(string(log), fmt.Sprintf(`"update_id":%d,"chat":"tg:%d"`, poison, tgGroup)) {
		t.Errorf("the daemon's log does not name update %d of tg:%d", poison, tgGroup)
	}

	told := func(s string) bool { return strings.HasPrefix(s, "[TELEGRAM] Polling stopped") }
	conflicts := func() (n int) {
		for _, p := range bot.Polls() {
			if p.Answered == 409 {
				n++
			}
		}
		return n
	}
	bot.Conflict(true)
	bot.WaitFor(t, "sendMessage", wait, anySent(tgOwner, told))
	if st := in.CLI("status"); !strings.Contains(st, "polling stopped since") || !strings.Contains(st, "stop the other program using this bot token") {
		t.Errorf("status does not show the stop and its fix:\n%s", st)
	}
	if out, _, _ := e2e.Run(t, "", in.Env, "doctor", "--config", in.Config); !strings.Contains(out, "FIX  telegram: bot @"+mocktelegram.BotUsername+"; the running daemon: polling stopped") {
		t.Errorf("doctor does not show the stop:\n%s", out)
	}
	if n := conflicts(); n != 1 {
		t.Errorf("%d polls met the 409; want 1 (polling stops)", n)
	}

	save := func() {
		t.Helper()
		cfg, err := os.ReadFile(in.Config)
		if err == nil {
			err = os.WriteFile(in.Config, cfg, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	save() // the other program still polls
	bot.WaitFor(t, "", wait, func([]mocktelegram.Request) bool { return conflicts() == 2 })
	bot.Conflict(false)
	save()
	bot.Push(map[string]any{"message": bot.Message(group, alice, "@Andy echo polling again", nil)})
	reqs := bot.WaitFor(t, "sendMessage", wait, anySent(tgGroup, func(s string) bool { return s == "echo: polling again" }))
	notices := 0
	for _, s := range sentTo(reqs, tgOwner) {
		if told(s) {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("the main chat was told %d times of the 409; want once", notices)
	}
}
