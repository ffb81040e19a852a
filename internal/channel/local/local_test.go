package local

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

type fakeSink struct {
	mu   sync.Mutex
	msgs []channel.Message
	fail error
}

func (s *fakeSink) OnMessage(_ context.Context, m channel.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.msgs = append(s.msgs, m)
	return nil
}

func (s *fakeSink) OnChat(context.Context, channel.Chat) error { return nil }

// onlyMain: the test's registry has local:main alone.
func onlyMain(_ context.Context, jid string) bool { return jid == "local:main" }

// serve runs a channel on a new socket and returns it, a client of it and
// a plain HTTP client of the socket (for bodies Client never sends).
func serve(t *testing.T, sink channel.Sink) (*Channel, *Client, *http.Client, string) {
	t.Helper()
	dir, _ := os.MkdirTemp("", "lc")
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	db, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := New(sock, db, func() int { return 1 << 10 }, onlyMain)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, sink) }()
	t.Cleanup(func() { cancel(); <-done })
	client := NewClient(sock)
	raw := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	deadline := time.Now().Add(10 * time.Second)
	for client.Health(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("socket never answered")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c, client, raw, sock
}

func post(t *testing.T, c *http.Client, body string) (int, string) {
	t.Helper()
	resp, err := c.Post("http://x/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func TestSocketIsPrivate(t *testing.T) {
	_, _, _, sock := serve(t, &fakeSink{})
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestPostMessage(t *testing.T) {
	sink := &fakeSink{}
	_, client, c, _ := serve(t, sink)
	ctx := context.Background()
	id, err := client.Post(ctx, Message{ChatJID: "local:family", Sender: "alice@x", SenderName: "Alice", Text: "@Andy hi", QuotedSender: "Bob", QuotedText: "lunch?"})
	if err != nil || id == "" {
		t.Fatalf("post: id %q, %v", id, err)
	}
	if len(sink.msgs) != 1 || sink.msgs[0].SenderName != "Alice" || sink.msgs[0].Text != "@Andy hi" || sink.msgs[0].ID != id ||
		sink.msgs[0].QuotedSender != "Bob" || sink.msgs[0].QuotedText != "lunch?" {
		t.Errorf("stored %+v", sink.msgs)
	}
	// The answer says whether a group has the chat: nothing answers one none has.
	for chat, want := range map[string]bool{"local:family": false, "local:main": true} {
		a, err := client.PostAccepted(ctx, Message{ChatJID: chat, Sender: "a@x", Text: "hi"})
		if err != nil || a.ID == "" || a.Registered != want {
			t.Errorf("post to %s: %+v, %v; want registered %t", chat, a, err, want)
		}
	}
	for _, bad := range []struct {
		body, want string
		code       int
	}{
		{`{"chatJid":"120363@g.us","text":"x"}`, "must start with", 400},
		{`{"chatJid":"local:a","text":"  "}`, "text is empty", 400},
		{`{"chatJid":"local:a","text":"x","extra":1}`, "unknown field", 400},
		{`not json`, "body must be JSON", 400},
		{`{"chatJid":"local:a","text":"` + strings.Repeat("x", 2<<20) + `"}`, "too large", 413},
		{`{"chatJid":"local:a","reactTo":"X"}`, "a reaction is", 400},
		{`{"chatJid":"local:a","reactTo":"X","emoji":"👍","text":"also"}`, "a reaction is", 400},
		{`{"chatJid":"local:a","media":{"type":"image/png","dataBase64":"***"}}`, "not standard base64", 400},
		{`{"chatJid":"local:a","media":{"type":"","dataBase64":""}}`, "media.type must be a MIME type", 400},
	} {
		code, body := post(t, c, bad.body)
		if code != bad.code || !strings.Contains(body, bad.want) {
			t.Errorf("%.40s: %d %s", bad.body, code, body)
		}
	}
	// The client's error says what the channel said.
	if _, err := client.Post(ctx, Message{ChatJID: "120363@g.us", Text: "x"}); err == nil || !strings.Contains(err.Error(), "400 Bad Request: chatJid") {
		t.Errorf("post to a foreign chat: %v", err)
	}
	sink.fail = fmt.Errorf("disk full")
	if _, err := client.Post(ctx, Message{ChatJID: "local:a", Text: "x"}); err == nil || !strings.Contains(err.Error(), "500 Internal Server Error: could not store the message: disk full") {
		t.Errorf("a message that was not stored was accepted: %v", err)
	}
}

// A file arrives as WhatsApp would deliver it: its kind from the MIME type
// (a voice note when "voice"), its name, size and bytes; a request may
// carry media.maxBytes in base64. A reaction names the message it is
// about; a reaction the daemon sends shows in /sent as such.
func TestPostMediaAndReactions(t *testing.T) {
	sink := &fakeSink{}
	ch, client, c, _ := serve(t, sink)
	ctx := context.Background()
	full := bytes.Repeat([]byte{0xff}, 1<<10) // serve's limit, exactly
	for _, tc := range []struct {
		media Media
		kind  string
	}{
		{Media{Type: "audio/ogg; codecs=opus", DataBase64: base64.StdEncoding.EncodeToString([]byte("OggS")), Voice: true}, channel.MediaVoice},
		{Media{Type: "audio/mpeg", DataBase64: base64.StdEncoding.EncodeToString([]byte("ID3"))}, channel.MediaAudio},
		{Media{Type: "image/jpeg", DataBase64: base64.StdEncoding.EncodeToString([]byte("\xff\xd8"))}, channel.MediaImage},
		{Media{Type: "video/mp4", DataBase64: base64.StdEncoding.EncodeToString([]byte("mp4"))}, channel.MediaVideo},
		{Media{Type: "application/pdf", Name: "report.pdf", DataBase64: base64.StdEncoding.EncodeToString(full)}, channel.MediaDocument},
	} {
		sink.msgs = nil
		if _, err := client.Post(ctx, Message{ChatJID: "local:a", Text: "caption", Media: &tc.media}); err != nil {
			t.Fatalf("%s: %v", tc.media.Type, err)
		}
		m := sink.msgs[0]
		want, _ := base64.StdEncoding.DecodeString(tc.media.DataBase64)
		data, _ := m.Media.Fetch(ctx)
		if m.Media.Kind != tc.kind || m.Media.MimeType != tc.media.Type || m.Media.Name != tc.media.Name ||
			m.Media.Size != int64(len(want)) || !bytes.Equal(data, want) || m.Text != "caption" {
			t.Errorf("%s: delivered %+v with %d bytes", tc.media.Type, m.Media, len(data))
		}
	}
	sink.msgs = nil
	if _, err := client.Post(ctx, Message{ChatJID: "local:a", ReactTo: "3EB0", Emoji: "👍"}); err != nil {
		t.Fatal(err)
	}
	if m := sink.msgs[0]; m.ReactTo != "3EB0" || m.Text != "👍" || m.Media != nil {
		t.Errorf("reaction delivered as %+v", m)
	}
	if err := ch.Send(ctx, channel.Outgoing{ID: "r1", ChatJID: "local:a", Text: "❤️", ReactTo: "3EB0", ReactSender: "alice"}); err != nil {
		t.Fatal(err)
	}
	ch.Send(ctx, channel.Outgoing{ID: "t1", ChatJID: "local:a", Text: "plain"})
	sent, err := client.Sent(ctx, 0, 0, "")
	if err != nil || len(sent) != 2 || sent[0].Reaction != "❤️" || sent[0].ReactTo != "3EB0" || sent[0].Text != "" ||
		sent[1].Reaction != "" || sent[1].ReactTo != "" || sent[1].Text != "plain" {
		t.Errorf("/sent = %+v, %v", sent, err)
	}
	// The raw JSON has the contract's field names.
	resp, err := c.Get("http://x/sent?after=0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw bytes.Buffer
	raw.ReadFrom(resp.Body)
	if !strings.Contains(raw.String(), `"reaction":"❤️","reactTo":"3EB0"`) {
		t.Errorf("/sent JSON: %s", raw.String())
	}
}

func TestSentLongPollAndDedupe(t *testing.T) {
	ch, client, c, _ := serve(t, &fakeSink{})
	ctx := context.Background()
	got := make(chan []SentMessage, 1)
	go func() {
		msgs, err := client.Sent(ctx, 0, 30*time.Second, "")
		if err != nil {
			t.Error(err)
		}
		got <- msgs
	}()
	// The waiting request returns as soon as something is sent.
	if err := ch.Send(ctx, channel.Outgoing{ID: "1", ChatJID: "local:a", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	msgs := <-got
	if len(msgs) != 1 || msgs[0].Text != "hello" || msgs[0].ChatJID != "local:a" || msgs[0].Seq != 1 {
		t.Fatalf("long poll got %+v", msgs)
	}
	if _, err := time.Parse(time.RFC3339Nano, msgs[0].Time); err != nil || !strings.Contains(msgs[0].Time, ".") {
		t.Errorf("time %q", msgs[0].Time)
	}
	// A retried send (same outbox id) is not shown twice.
	ch.Send(ctx, channel.Outgoing{ID: "1", ChatJID: "local:a", Text: "hello"})
	ch.Send(ctx, channel.Outgoing{ID: "2", ChatJID: "local:b", Text: "second"})
	second, err := client.Sent(ctx, 1, 0, "")
	if err != nil || len(second) != 1 || second[0].Text != "second" {
		t.Fatalf("after=1: %+v, %v", second, err)
	}
	// Only one chat's messages, and none yet after the last: no wait.
	if msgs, err := client.Sent(ctx, 0, 0, "local:a"); err != nil || len(msgs) != 1 || msgs[0].Text != "hello" {
		t.Errorf("chat local:a: %+v, %v", msgs, err)
	}
	if msgs, err := client.Sent(ctx, second[0].Seq, 0, ""); err != nil || len(msgs) != 0 {
		t.Errorf("after the last: %+v, %v", msgs, err)
	}
	resp, _ := c.Get("http://x/sent?after=abc")
	if resp.StatusCode != 400 {
		t.Errorf("bad after: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

func TestLiveSocketNotStolen(t *testing.T) {
	_, _, _, sock := serve(t, &fakeSink{})
	db, _ := store.Open(t.TempDir())
	defer db.Close()
	err := New(sock, db, func() int { return 1 << 10 }, onlyMain).Run(context.Background(), &fakeSink{})
	if err == nil || !strings.Contains(err.Error(), "served by another process") {
		t.Errorf("second server on a live socket: %v", err)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	dir, _ := os.MkdirTemp("", "lc")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	ln, _ := net.Listen("unix", sock)
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // what a kill -9 leaves behind
	db, _ := store.Open(t.TempDir())
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(sock, db, func() int { return 1 << 10 }, onlyMain).Run(ctx, &fakeSink{}) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if conn, err := net.Dial("unix", sock); err == nil {
			conn.Close()
			break
		}
		select {
		case err := <-done:
			t.Fatalf("stale socket not replaced: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("never served")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}

// A message with a file shows the file's name, type and size in /sent
// (the text, time and seq as always), and its bytes at /files/SEQ; a
// repeat of the same message is not shown twice; a copy that is gone
// cannot be sent.
func TestSendWithFile(t *testing.T) {
	c, client, _, _ := serve(t, &fakeSink{})
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "copy")
	if err := os.WriteFile(path, []byte("%PDF-1.4 report"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := channel.Outgoing{ID: "k1", ChatJID: "local:fam", Text: "the report",
		File: &channel.Attachment{Name: "report.pdf", MIME: "application/pdf", Path: path}}
	for range 2 {
		if err := c.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Send(ctx, channel.Outgoing{ID: "k2", ChatJID: "local:fam", Text: "plain"}); err != nil {
		t.Fatal(err)
	}
	sent, err := client.Sent(ctx, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 2 {
		t.Fatalf("sent %+v, want 2 messages", sent)
	}
	f := sent[0]
	if f.Text != "the report" || f.ChatJID != "local:fam" || f.File != "report.pdf" || f.FileType != "application/pdf" || f.FileBytes != 15 || f.Time == "" {
		t.Errorf("file message %+v", f)
	}
	if p := sent[1]; p.File != "" || p.FileType != "" || p.FileBytes != 0 {
		t.Errorf("plain message %+v carries a file", p)
	}
	if data, err := client.File(ctx, f.Seq); err != nil || string(data) != "%PDF-1.4 report" {
		t.Errorf("GET /files/%d = %q, %v", f.Seq, data, err)
	}
	if _, err := client.File(ctx, sent[1].Seq); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("GET /files of a message without a file: %v, want 404", err)
	}
	m.ID, m.File.Path = "k3", filepath.Join(t.TempDir(), "gone")
	if err := c.Send(ctx, m); !errors.Is(err, channel.ErrUndeliverable) {
		t.Errorf("sending a missing copy: %v, want ErrUndeliverable", err)
	}
}
