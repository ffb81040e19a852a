package e2e_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

const (
	tgToken = "123456:AAtest-token_test-token_test-tokenX"
	tgOwner = 4242          // the owner's user id; their private chat is main
	tgGroup = -100987654321 // a confined group
)

// telegramInstall is an install whose Telegram channel polls the mock.
func telegramInstall(t *testing.T) (*e2e.Install, *mocktelegram.Server) {
	t.Helper()
	bot := mocktelegram.Start(t, tgToken)
	dir := t.TempDir()
	transcriber := filepath.Join(dir, "transcriber")
	script := "#!/bin/sh\nprintf 'TRANSCRIPT of %s bytes\\n' \"$(wc -c < \"$1\" | tr -d ' ')\"\n"
	if err := os.WriteFile(transcriber, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	in := e2e.New(t, e2e.Options{
		Channels: `"whatsapp": {"enabled": false}, "telegram": {"enabled": true, "token": ` + e2e.Quote(tgToken) + `, "apiURL": ` + e2e.Quote(bot.URL) + `}`,
		Media:    `"transcribe": {"command": [` + e2e.Quote(transcriber) + `, "{file}"]}`,
	})
	in.AddGroup(fmt.Sprintf("tg:%d", tgOwner), "main", "--main")
	in.AddGroup(fmt.Sprintf("tg:%d", tgGroup), "family")
	return in, bot
}

// sentTo is the text of each sendMessage to chat, as the chat shows it.
func sentTo(reqs []mocktelegram.Request, chat int64) []string {
	var out []string
	for _, r := range reqs {
		if r.Chat() == strconv.FormatInt(chat, 10) && r.Answered == 0 {
			out = append(out, html.UnescapeString(r.Params["text"]))
		}
	}
	return out
}

func anySent(chat int64, ok func(string) bool) func([]mocktelegram.Request) bool {
	return func(reqs []mocktelegram.Request) bool {
		for _, s := range sentTo(reqs, chat) {
			if ok(s) {
				return true
			}
		}
		return false
	}
}

// Telegram end to end, against a mock Bot API on loopback: a text in a
// registered tg: group is answered with sendMessage (as HTML); a photo and
// a voice note reach the prompt as saved media, the voice note
// transcribed; a reaction reaches the prompt; the agent's reaction goes
// out with setMessageReaction; a reply to the bot and its @username call
// the assistant; a violation in the confined group is alerted to the
// Telegram main chat, whose owner's /groups the daemon answers; a 429
// with retry_after 2 delays the reply and never drops it; a 403 is given
// up, told to main and shown in status.
func TestTelegramEndToEnd(t *testing.T) {
	in, bot := telegramInstall(t)
	in.Start()
	group := mocktelegram.Group(tgGroup, "Family")
	alice := mocktelegram.User(77, "Alice")
	wait := 90 * time.Second
	send := func(text string, more map[string]any) int {
		m := bot.Message(group, alice, text, more)
		bot.Push(map[string]any{"message": m})
		return m["message_id"].(int)
	}

	// A text, answered in that chat as HTML.
	send("@Andy echo hello", nil)
	reqs := bot.WaitFor(t, "sendMessage", wait, anySent(tgGroup, func(s string) bool { return s == "echo: hello" }))
	if reqs[len(reqs)-1].Params["parse_mode"] != "HTML" {
		t.Errorf("the reply was not sent as HTML: %+v", reqs[len(reqs)-1].Params)
	}

	// A photo and a voice note, then a reaction to the photo.
	jpg, ogg := make([]byte, 3000), make([]byte, 5000)
	rand.Read(jpg)
	rand.Read(ogg)
	photo := send("", map[string]any{"caption": "our kitchen", "photo": []any{
		map[string]any{"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 10},
		map[string]any{"file_id": bot.AddFile(jpg), "file_unique_id": "b", "width": 800, "height": 600, "file_size": len(jpg)},
	}})
	voice := send("", map[string]any{"voice": map[string]any{"file_id": bot.AddFile(ogg), "file_unique_id": "v", "duration": 3, "mime_type": "audio/ogg", "file_size": len(ogg)}})
	bot.Push(map[string]any{"message_reaction": mocktelegram.Reaction(group, alice, photo, "❤")})
	send("@Andy prompt", nil)
	reqs = bot.WaitFor(t, "sendMessage", wait, anySent(tgGroup, func(s string) bool { return strings.Contains(s, "@Andy prompt") }))
	prompt := sentTo(reqs, tgGroup)[len(sentTo(reqs, tgGroup))-1]
	for _, want := range []string{
		fmt.Sprintf(`<message id="%d" sender="Alice"`, photo),
		fmt.Sprintf(`[image 2 KB, media/%d.jpg] our kitchen</message>`, photo),
		fmt.Sprintf(`media/%d.ogg] transcript: TRANSCRIPT of 5000 bytes</message>`, voice),
		fmt.Sprintf(`to="%d">❤</reaction>`, photo),
	} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %s:\n%s", want, prompt)
		}
	}
	media := filepath.Join(in.Layout().Group("family"), "media")
	if got, err := os.ReadFile(filepath.Join(media, fmt.Sprintf("%d.jpg", photo))); err != nil || string(got) != string(jpg) {
		t.Errorf("media/%d.jpg is not the photo's bytes (%d bytes, %v)", photo, len(got), err)
	}

	// The agent's reaction.
	send(fmt.Sprintf("@Andy react %d 👍", photo), nil)
	bot.WaitFor(t, "setMessageReaction", wait, func(rs []mocktelegram.Request) bool {
		for _, r := range rs {
			if r.Chat() == strconv.FormatInt(tgGroup, 10) && r.Params["message_id"] == strconv.Itoa(photo) && strings.Contains(r.Params["reaction"], "👍") {
				return true
			}
		}
		return false
	})

	// Other ways to call the assistant in a group: a reply to the bot, its @username.
	botMsg := map[string]any{"message_id": 1, "date": time.Now().Unix(), "chat": group, "text": "earlier",
		"from": map[string]any{"id": mocktelegram.BotID, "is_bot": true, "first_name": "Nano", "username": mocktelegram.BotUsername}}
	// (The stand-in agent drops the trigger put in front: "echo by reply" is echoed as "by reply".)
	send("echo by reply", map[string]any{"reply_to_message": botMsg})
	bot.WaitFor(t, "sendMessage", wait, anySent(tgGroup, func(s string) bool { return s == "echo: by reply" }))
	send("@"+mocktelegram.BotUsername+" echo by name", nil)
	bot.WaitFor(t, "sendMessage", wait, anySent(tgGroup, func(s string) bool { return s == "echo: by name" }))

	// A violation in the confined group: alerted to the Telegram main chat,
	// where the owner's /groups is the daemon's.
	send("@Andy violation network evil.example", nil)
	bot.WaitFor(t, "sendMessage", wait, anySent(tgOwner, func(s string) bool {
		return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, "family") && strings.Contains(s, "evil.example")
	}))
	owner := mocktelegram.Private(tgOwner, "Owner")
	bot.Push(map[string]any{"message": bot.Message(owner, mocktelegram.User(tgOwner, "Owner"), "/groups", nil)})
	bot.WaitFor(t, "sendMessage", wait, anySent(tgOwner, func(s string) bool { return strings.Contains(s, "family") && !strings.HasPrefix(s, "[SANDBOX ALERT]") }))

	// Flood control: 429 retry_after 2 delays the reply, never drops it.
	bot.FailNext("sendMessage", mocktelegram.Failure{Code: 429, Description: "Too Many Requests: retry after 2", RetryAfter: 2})
	send("@Andy echo slow", nil)
	reqs = bot.WaitFor(t, "sendMessage", wait, anySent(tgGroup, func(s string) bool { return s == "echo: slow" }))
	var refused, ok []mocktelegram.Request
	for _, r := range reqs {
		switch {
		case r.Answered == 429:
			refused = append(refused, r)
		case html.UnescapeString(r.Params["text"]) == "echo: slow":
			ok = append(ok, r)
		}
	}
	if len(refused) != 1 || len(ok) != 1 || ok[0].Time.Sub(refused[0].Time) < 2*time.Second {
		t.Errorf("after a 429 with retry_after 2: %d refused, %d sent, want one each, the second ≥ 2 s later: %+v %+v", len(refused), len(ok), refused, ok)
	}

	// 403: the bot was removed from the group. Given up, main told, status shows it.
	bot.FailNext("sendMessage", mocktelegram.Failure{Code: 403, Description: "Forbidden: bot was kicked from the supergroup chat"})
	send("@Andy echo gone", nil)
	bot.WaitFor(t, "sendMessage", wait, anySent(tgOwner, func(s string) bool {
		return strings.Contains(s, fmt.Sprintf("tg:%d could not be delivered", tgGroup))
	}))
	if st := in.CLI("status"); !strings.Contains(st, "403") || !strings.Contains(st, fmt.Sprintf("tg:%d", tgGroup)) {
		t.Errorf("status does not show the 403 in tg:%d:\n%s", tgGroup, st)
	}
	var chats []struct{ JID, Title, Type, Folder string }
	list := in.CLI("telegram", "chats", "--json")
	if err := json.Unmarshal([]byte(list), &chats); err != nil {
		t.Fatalf("telegram chats --json: %v\n%s", err, list)
	}
	if !slices.Contains(chats, struct{ JID, Title, Type, Folder string }{fmt.Sprintf("tg:%d", tgGroup), "Family", "supergroup", "family"}) {
		t.Errorf("telegram chats --json does not list the group: %s", list)
	}
}

// kill -9 right after an update was fetched: after the restart the
// message is answered exactly once, and the offset moves past it.
func TestTelegramKillAfterFetch(t *testing.T) {
	in, bot := telegramInstall(t)
	p := in.Start()
	group := mocktelegram.Group(tgGroup, "Family")
	id := bot.Push(map[string]any{"message": bot.Message(group, mocktelegram.User(77, "Alice"), "@Andy echo once", nil)})
	bot.WaitFetched(t, id, 60*time.Second)
	p.Kill9()
	in.Start()
	bot.WaitFor(t, "sendMessage", 90*time.Second, anySent(tgGroup, func(s string) bool { return s == "echo: once" }))
	bot.WaitFor(t, "", 30*time.Second, func([]mocktelegram.Request) bool {
		for _, o := range bot.Offsets() {
			if o > id {
				return true
			}
		}
		return false
	})
	// One more round trip through the same chat: had the message been
	// stored twice, its second copy would have been answered before this.
	bot.Push(map[string]any{"message": bot.Message(group, mocktelegram.User(77, "Alice"), "@Andy echo after", nil)})
	reqs := bot.WaitFor(t, "sendMessage", 90*time.Second, anySent(tgGroup, func(s string) bool { return s == "echo: after" }))
	n := 0
	for _, s := range sentTo(reqs, tgGroup) {
		if s == "echo: once" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the message fetched before kill -9 was answered %d times, want once: %q", n, sentTo(reqs, tgGroup))
	}
}
