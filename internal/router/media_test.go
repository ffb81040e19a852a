package router

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

func file(kind, mime, name string, size int64, secs int, data []byte, err error) *channel.Media {
	return &channel.Media{Kind: kind, MimeType: mime, Name: name, Size: size, Seconds: secs,
		Fetch: func(context.Context) ([]byte, error) { return data, err }}
}

// Through OnMessage: a voice note is stored at once, saying it is not
// transcribed yet; the stand-in transcriber's text then replaces that,
// and only then may it start a run. A reaction is stored as context and
// calls no one; a quote named by id alone is filled in from the chat.
func TestVoiceNoteReactionAndQuote(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	release := filepath.Join(dir, "go")
	tr := filepath.Join(dir, "tr")
	// Waits for the test to say go: the note must be stored before its text.
	os.WriteFile(tr, []byte("#!/bin/sh\nwhile [ ! -e "+release+" ]; do sleep 0.01; done\nprintf 'heard %s bytes' $(wc -c < \"$1\")\n"), 0o755)
	e.cfg.Media = config.Media{MaxBytes: 1 << 20, Transcribe: config.Transcribe{Command: []string{tr, "{file}"}, Timeout: config.Duration(time.Minute)}}
	enqueued := make(chan string, 10)
	e.r.Queue = &mock.Queue{EnqueueMessagesFn: func(f string) { enqueued <- f }, RunningFn: func(string) bool { return false }}
	ctx := context.Background()

	note := channel.Message{ChatJID: mainJID, ID: "V1", SenderJID: "owner", Time: time.Now(),
		Media: file("voice note", "audio/ogg; codecs=opus", "", 6, 7, []byte("OggS!!"), nil)}
	if err := e.r.OnMessage(ctx, note); err != nil {
		t.Fatal(err)
	}
	msgs, _ := e.msgs.Unanswered(ctx, mainJID)
	if len(msgs) != 1 || msgs[0].Media != "[voice note 0:07, media/V1.ogg] (not transcribed: the daemon stopped before the transcription finished)" {
		t.Fatalf("stored at first: %+v", msgs)
	}
	waitCtx, cancel := context.WithCancel(ctx)
	cancel()
	if err := e.r.Media.Wait(waitCtx, mainJID, nil); err == nil {
		t.Error("a run would not wait for the transcription")
	}
	select {
	case f := <-enqueued:
		t.Fatalf("a run of %s was queued before the transcript", f)
	default:
	}
	os.WriteFile(release, nil, 0o644)
	if f := <-enqueued; f != "main" {
		t.Errorf("queued a run of %s", f)
	}
	if err := e.r.Media.Wait(ctx, mainJID, nil); err != nil {
		t.Fatal(err)
	}
	msgs, _ = e.msgs.Unanswered(ctx, mainJID)
	if msgs[0].Media != "[voice note 0:07, media/V1.ogg] transcript: heard 6 bytes" {
		t.Errorf("after transcription: %q", msgs[0].Media)
	}

	// Without a transcriber the marker says so at once.
	e.cfg.Media.Transcribe = config.Transcribe{}
	note.ID = "V2"
	if err := e.r.OnMessage(ctx, note); err != nil {
		t.Fatal(err)
	}
	<-enqueued
	msgs, _ = e.msgs.Unanswered(ctx, mainJID)
	if !strings.HasSuffix(msgs[1].Media, "(not transcribed: "+"no transcriber is set up (media.transcribe.command or media.transcribe.url in the config))") {
		t.Errorf("without a transcriber: %q", msgs[1].Media)
	}

	if err := e.r.OnMessage(ctx, channel.Message{ChatJID: mainJID, ID: "R1", SenderJID: "bob", Text: "👍", ReactTo: "V1", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := e.r.OnMessage(ctx, channel.Message{ChatJID: mainJID, ID: "Q1", SenderJID: "bob", Text: "ok", QuotedID: "V2", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if f := <-enqueued; f != "main" || len(enqueued) != 0 {
		t.Errorf("queued %s and %d more; want one run, for the reply alone", f, len(enqueued))
	}
	msgs, _ = e.msgs.Unanswered(ctx, mainJID)
	prompt, _ := e.r.promptOf(msgs)
	for _, want := range []string{`<reaction id="R1" sender="bob"`, `to="V1">👍</reaction>`, `<message id="Q1" sender="bob"`, `<quote id="V2" sender="owner">[voice note 0:07, media/V2.ogg] (not transcribed`} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %s:\n%s", want, prompt)
		}
	}
	if anyCalls(groups.Group{JID: famJID}, msgs[2:3]) {
		t.Error("a reaction counts as calling the assistant in a group without a trigger")
	}
}

// A message delivered again under the same id (WhatsApp redelivers; a
// sender's app picks the id) does not replace the file saved the first
// time, nor is it downloaded again.
func TestRedeliveryKeepsTheFirstFile(t *testing.T) {
	e := newEnv(t)
	e.cfg.Media.MaxBytes = 1 << 20
	e.r.Queue = &mock.Queue{EnqueueMessagesFn: func(string) {}, RunningFn: func(string) bool { return false }}
	ctx := context.Background()
	fetches := 0
	send := func(data string) {
		t.Helper()
		m := channel.Message{ChatJID: mainJID, ID: "D1", SenderJID: "owner", Time: time.Now(), Media: &channel.Media{Kind: "document",
			MimeType: "application/pdf", Fetch: func(context.Context) ([]byte, error) { fetches++; return []byte(data), nil }}}
		if err := e.r.OnMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	send("first")
	send("second")
	got, _ := os.ReadFile(filepath.Join(e.cfg.GroupsDir, "main", "media", "D1.pdf"))
	if string(got) != "first" || fetches != 1 {
		t.Errorf("media/D1.pdf holds %q after %d downloads; want the first copy, downloaded once", got, fetches)
	}
}

// One chat's voice notes are transcribed one at a time; another chat's
// go on beside them.
func TestTranscriptionsTakeTurnsPerChat(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	// Family's transcriber runs confined, as the runs' user: it must reach
	// its program, and it cannot write the log (its start shows as a
	// process instead).
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o755)
	log := filepath.Join(dir, "log")
	tr := filepath.Join(dir, "tr")
	// Each note's transcription waits for its own go-file.
	os.WriteFile(tr, []byte("#!/bin/sh\nn=$(basename $1 .ogg)\necho $n >> "+log+" 2>/dev/null\nwhile [ ! -e "+dir+"/go-$n ]; do sleep 0.01; done\necho words\n"), 0o755)
	release := func(id string) { os.WriteFile(filepath.Join(dir, "go-"+id), nil, 0o644) }
	e.cfg.Media = config.Media{MaxBytes: 1 << 20, Transcribe: config.Transcribe{Command: []string{tr, "{file}"}, Timeout: config.Duration(time.Minute)}}
	e.r.Queue = &mock.Queue{EnqueueMessagesFn: func(string) {}, RunningFn: func(string) bool { return false }}
	ctx := context.Background()
	for _, n := range []struct{ chat, id string }{{mainJID, "A1"}, {mainJID, "A2"}, {famJID, "B1"}} {
		if err := e.r.OnMessage(ctx, channel.Message{ChatJID: n.chat, ID: n.id, SenderJID: alice, Time: time.Now(),
			Media: file("voice note", "audio/ogg", "", 4, 1, []byte("OggS"), nil)}); err != nil {
			t.Fatal(err)
		}
	}
	started := func() string {
		b, _ := os.ReadFile(log)
		cmds, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, c := range cmds {
			if cl, _ := os.ReadFile(c); strings.Contains(string(cl), "B1.ogg") {
				return string(b) + "B1 (running)\n"
			}
		}
		return string(b)
	}
	waitStarted := func(ok func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(started()); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("transcriptions started: %q", started())
			}
		}
	}
	// Family's note is done while main's first is still going.
	waitStarted(func(s string) bool { return strings.Contains(s, "B1") && strings.Contains(s, "A") })
	release("B1")
	if err := e.r.Media.Wait(ctx, famJID, nil); err != nil {
		t.Fatal(err)
	}
	first, second := "A1", "A2"
	if !strings.Contains(started(), "A1") {
		first, second = second, first
	}
	if strings.Contains(started(), second) {
		t.Fatalf("both of main's notes ran at once: %q", started())
	}
	release(first)
	waitStarted(func(s string) bool { return strings.Contains(s, second) })
	release(second)
	if err := e.r.Media.Wait(ctx, mainJID, nil); err != nil {
		t.Fatal(err)
	}
}
