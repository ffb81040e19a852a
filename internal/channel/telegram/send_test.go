package telegram_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

// shown is what the chat shows of a send: its text or caption with the
// HTML parsed as Telegram parses it.
func shown(t *testing.T, r mocktelegram.Request) string {
	t.Helper()
	text := r.Params["text"] + r.Params["caption"]
	v, err := mocktelegram.Visible(text)
	if err != nil {
		t.Fatalf("%s: %v in %q", r.Method, err, text)
	}
	return v
}

// A caption over Telegram's 1024 characters goes with the file up to the
// limit, the rest as messages after it; Telegram refuses none of them.
func TestLongCaption(t *testing.T) {
	bot := mocktelegram.Start(t, token)
	c := newChannel(t, bot, nil, telegram.Options{})
	file := filepath.Join(t.TempDir(), "r.pdf")
	os.WriteFile(file, []byte("pdf"), 0o600)
	var words []string
	for i := range 1100 { // ≈ 6000 characters
		words = append(words, "w"+strings.Repeat("x", i%7))
	}
	text := strings.Join(words, " ")
	if err := c.Send(context.Background(), channel.Outgoing{ID: "1", ChatJID: "tg:-1002", Text: text,
		File: &channel.Attachment{Name: "r.pdf", MIME: "application/pdf", Path: file}}); err != nil {
		t.Fatal(err)
	}
	doc, msgs := bot.Requests("sendDocument"), bot.Requests("sendMessage")
	if len(doc) != 1 || doc[0].Answered != 0 || len(msgs) != 2 {
		t.Fatalf("%d documents, %d messages; want the file once, then two messages: %+v %+v", len(doc), len(msgs), doc, msgs)
	}
	got := []string{shown(t, doc[0])}
	for _, m := range msgs {
		if m.Answered != 0 {
			t.Errorf("refused: %+v", m)
		}
		got = append(got, shown(t, m))
	}
	if len(got[0]) > mocktelegram.MaxCaption || len(got[0]) < mocktelegram.MaxCaption-10 {
		t.Errorf("the caption is %d characters; want it filled up to %d", len(got[0]), mocktelegram.MaxCaption)
	}
	if strings.Join(got, " ") != text {
		t.Error("the caption and the messages after it are not the text, in order")
	}
}

// Fenced code cut at 4096 characters is closed at the end of each part
// and opened again, with its language, at the start of the next: every
// part parses, and none turns the code after the cut into prose. (The
// first part is the paragraph before the code: cuts go between
// paragraphs first.)
func TestLongCodeBlock(t *testing.T) {
	bot := mocktelegram.Start(t, token)
	c := newChannel(t, bot, nil, telegram.Options{})
	var code []string
	for i := range 400 {
		code = append(code, "    if a < b && c > d { x *= 2 } // line "+strings.Repeat("*", i%3))
	}
	text := "Here:\n\n```go\n" + strings.Join(code, "\n") + "\n```\n\nand **after** it."
	if err := c.Send(context.Background(), channel.Outgoing{ID: "1", ChatJID: "tg:-1002", Text: text}); err != nil {
		t.Fatal(err)
	}
	msgs := bot.Requests("sendMessage")
	if len(msgs) < 4 {
		t.Fatalf("%d messages for %d characters", len(msgs), len(text))
	}
	var lines []string
	for i, m := range msgs {
		if m.Answered != 0 || m.Params["parse_mode"] != "HTML" {
			t.Fatalf("part %d: %+v", i, m)
		}
		body := m.Params["text"]
		if i > 0 && !strings.HasPrefix(body, `<pre><code class="language-go">    if a &lt; b`) {
			t.Errorf("part %d does not open the code again: %.80q", i, body)
		}
		if i > 0 && i < len(msgs)-1 && !strings.HasSuffix(body, "</code></pre>") {
			t.Errorf("part %d does not close the code: …%q", i, body[max(0, len(body)-40):])
		}
		v := shown(t, m)
		lines = append(lines, strings.Split(strings.TrimPrefix(v, "Here:\n\n"), "\n")...)
	}
	if last := msgs[len(msgs)-1].Params["text"]; !strings.HasSuffix(last, "</code></pre>\n\nand <b>after</b> it.") {
		t.Errorf("the text after the code: …%q", last[max(0, len(last)-60):])
	}
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "    if a < b && c > d") {
			n++
		}
	}
	if n != len(code) {
		t.Errorf("%d of %d code lines arrived whole, indented", n, len(code))
	}
}
