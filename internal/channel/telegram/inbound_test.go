package telegram_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/channel/telegram"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mocktelegram"
)

// The bot's @username calls the assistant in a group as its trigger does,
// in any case, with or without Telegram's mention entity, anywhere in the
// text — even when the username starts with the assistant's name — but
// not as part of a longer name or an address.
func TestMentionTriggers(t *testing.T) {
	bot := mocktelegram.Start(t, token)
	bot.SetUsername("andy_test_bot")
	c := newChannel(t, bot, nil, telegram.Options{})
	s := &sink{got: make(chan struct{}, 10)}
	run(t, c, s)
	group, alice := mocktelegram.Group(-1001, "Family"), mocktelegram.User(5, "Alice")
	mention := func(offset, length int) map[string]any {
		return map[string]any{"entities": []any{map[string]any{"type": "mention", "offset": offset, "length": length}}}
	}
	for _, tc := range []struct {
		text string
		more map[string]any
		want string
	}{
		{"@andy_test_bot hi", nil, "@Andy hi"},
		{"@Andy_Test_Bot, hi", mention(0, 14), "@Andy hi"},
		{"hi @ANDY_TEST_BOT!", mention(3, 14), "@Andy hi @ANDY_TEST_BOT!"},
		{"/help@andy_test_bot", nil, "@Andy /help@andy_test_bot"},
		{"@andy_test_bots hi", nil, "@andy_test_bots hi"},
		{"mail me at me@andy_test_bot", nil, "mail me at me@andy_test_bot"},
		{"@Andy hi", nil, "@Andy hi"},
	} {
		bot.Push(map[string]any{"message": bot.Message(group, alice, tc.text, tc.more)})
		if m := s.next(t); m.Text != tc.want {
			t.Errorf("%q arrived as %q, want %q", tc.text, m.Text, tc.want)
		}
	}
}

// A file over a limit is refused, never cut short and kept as if whole:
// over media.maxBytes (MaxBytes) whatever it claimed to be, and over the
// 20 MB Telegram lets a bot download (getFile answers 400).
func TestDownloadLimits(t *testing.T) {
	bot := mocktelegram.Start(t, token)
	limit := 1000 // read by Fetch, which runs here
	c := newChannel(t, bot, nil, telegram.Options{MaxBytes: func() int { return limit }})
	s := &sink{got: make(chan struct{}, 10)}
	run(t, c, s)
	ctx := context.Background()
	group, alice := mocktelegram.Group(-1001, "Family"), mocktelegram.User(5, "Alice")
	fetch := func(data []byte, size int) ([]byte, error) {
		t.Helper()
		doc := map[string]any{"file_id": bot.AddFile(data), "file_unique_id": "d", "file_name": "f.bin", "mime_type": "application/octet-stream"}
		if size > 0 {
			doc["file_size"] = size
		}
		bot.Push(map[string]any{"message": bot.Message(group, alice, "", map[string]any{"document": doc})})
		m := s.next(t)
		if m.Media == nil {
			t.Fatalf("no file: %+v", m)
		}
		return m.Media.Fetch(ctx)
	}
	if data, err := fetch(make([]byte, 1000), 1000); err != nil || len(data) != 1000 {
		t.Errorf("a file at the limit: %d bytes, %v", len(data), err)
	}
	var tb *channel.TooBigError
	// Claims nothing; getFile names its size.
	if data, err := fetch(make([]byte, 3000), 0); !errors.As(err, &tb) || data != nil || tb.Size != 3000 || tb.Limit != 1000 || tb.Why != "media.maxBytes" {
		t.Errorf("3000 bytes over a 1000-byte limit: %d bytes, %v", len(data), err)
	}
	big := make([]byte, mocktelegram.MaxDownload+1)
	limit = 50 << 20
	if data, err := fetch(big, len(big)); !errors.As(err, &tb) || data != nil || tb.Limit != mocktelegram.MaxDownload {
		t.Errorf("a file over Telegram's 20 MB: %d bytes, %v", len(data), err)
	}
}
