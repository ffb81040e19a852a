package e2e_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// Everything people send reaches the agent, over the local channel as
// WhatsApp would deliver it: a photo, a PDF and a voice note each reach
// the prompt of a confined group with the path of a byte-identical copy in
// its folder, the voice note with the stand-in transcriber's text (run by
// the daemon, outside the sandbox); a file over media.maxBytes is not
// saved and the prompt says so. The confined agent reads its media files.
// In the main chat a reaction is context for the next prompt and starts
// no run of its own; the agent's reaction (a reaction IPC file) shows up
// in /sent.
func TestMediaEndToEnd(t *testing.T) {
	dir := t.TempDir()
	transcriber := filepath.Join(dir, "transcriber")
	// A stand-in for whisper-cli: the audio's path is its argument, its
	// stdout the text.
	script := "#!/bin/sh\nprintf 'TRANSCRIPT of %s bytes\\n' \"$(wc -c < \"$1\" | tr -d ' ')\"\n"
	if err := os.WriteFile(transcriber, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	in := e2e.New(t, e2e.Options{Media: `"maxBytes": 65536, "transcribe": {"command": [` + e2e.Quote(transcriber) + `, "{file}"]}`})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family")
	in.Start()
	ctx := context.Background()

	png, pdf, ogg, zip := random(t, 2000), random(t, 30000), random(t, 5000), random(t, 100<<10)
	post := func(m local.Message) string {
		t.Helper()
		m.Sender, m.SenderName = "alice@local", "Alice"
		id, err := in.Local.Post(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	file := func(typ, name string, data []byte, voice bool) *local.Media {
		return &local.Media{Type: typ, Name: name, DataBase64: base64.StdEncoding.EncodeToString(data), Voice: voice}
	}
	img := post(local.Message{ChatJID: "local:family", Text: "our kitchen", Media: file("image/png", "", png, false)})
	doc := post(local.Message{ChatJID: "local:family", Media: file("application/pdf", "report.pdf", pdf, false)})
	voice := post(local.Message{ChatJID: "local:family", Media: file("audio/ogg; codecs=opus", "", ogg, true)})
	huge := post(local.Message{ChatJID: "local:family", Media: file("application/zip", "photos.zip", zip, false)})
	in.Post("local:family", "Alice", "@Andy prompt")
	prompt := lastText(in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "@Andy prompt") }), "local:family")
	for _, want := range []string{
		fmt.Sprintf(`<message id="%s" sender="Alice"`, img),
		fmt.Sprintf(`[image 1 KB, media/%s.png] our kitchen</message>`, img),
		fmt.Sprintf(`[document report.pdf, 29 KB, media/%s.pdf]</message>`, doc),
		fmt.Sprintf(`[voice note 4 KB, media/%s.ogg] transcript: TRANSCRIPT of 5000 bytes</message>`, voice),
		fmt.Sprintf(`<message id="%s" sender="Alice"`, huge),
		`[document photos.zip, 100 KB: not downloaded, larger than the 64 KB limit (media.maxBytes)]`,
	} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %s:\n%s", want, prompt)
		}
	}
	media := filepath.Join(in.Layout().Group("family"), "media")
	for name, data := range map[string][]byte{img + ".png": png, doc + ".pdf": pdf, voice + ".ogg": ogg} {
		if got, err := os.ReadFile(filepath.Join(media, name)); err != nil || !bytes.Equal(got, data) {
			t.Errorf("media/%s is not a byte-identical copy (%d bytes, %v)", name, len(got), err)
		}
	}
	if entries, _ := os.ReadDir(media); len(entries) != 3 {
		t.Errorf("media/ holds %d files, want the three under the limit", len(entries))
	}

	// The family's agent runs confined, and reads what it was sent.
	in.Post("local:family", "Alice", fmt.Sprintf("@Andy hash media/%s.png media/%s.pdf media/%s.ogg %s", img, doc, voice, in.Config))
	hashes := lastText(in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "sha256:") || strings.Contains(s, "error:") }), "local:family")
	for name, data := range map[string][]byte{img + ".png": png, doc + ".pdf": pdf, voice + ".ogg": ogg} {
		if want := fmt.Sprintf("media/%s sha256:%x %d", name, sha256.Sum256(data), len(data)); !strings.Contains(hashes, want) {
			t.Errorf("the confined agent read otherwise: want %q in\n%s", want, hashes)
		}
	}
	if !strings.Contains(hashes, in.Config+" error:") {
		t.Errorf("the family's agent read the config, so it did not run confined:\n%s", hashes)
	}

	// A reaction in the main chat is context: no run answers it alone,
	// the next prompt shows it, naming the message it is about.
	in.Post("local:main", "Owner", "echo first")
	before := in.WaitFor("local:main", e2e.Equals("echo: first"))
	first := before[len(before)-1].Seq
	target := in.Post("local:main", "Owner", "@Andy echo the one to like")
	in.WaitFor("local:main", e2e.Equals("echo: the one to like"))
	react := post(local.Message{ChatJID: "local:main", ReactTo: target, Emoji: "👍"})
	in.Post("local:main", "Owner", "prompt")
	after := in.WaitFor("local:main", func(s string) bool { return strings.Contains(s, "<reaction") })
	var since []string
	for _, m := range after {
		if m.ChatJID == "local:main" && m.Seq > first {
			since = append(since, m.Text)
		}
	}
	if len(since) != 2 || since[0] != "echo: the one to like" {
		t.Errorf("main got %q; want the echo, then one reply that holds the reaction (none for the reaction alone)", since)
	}
	if want := fmt.Sprintf(`<reaction id="%s" sender="Alice"`, react); !strings.Contains(since[len(since)-1], want) ||
		!strings.Contains(since[len(since)-1], fmt.Sprintf(`to="%s">👍</reaction>`, target)) {
		t.Errorf("the reaction is not in the next prompt as its own element:\n%s", since[len(since)-1])
	}

	// The family's agent reacts; the chat shows the reaction.
	in.Post("local:family", "Alice", "@Andy react "+doc+" ❤️")
	deadline := time.Now().Add(60 * time.Second)
	var seen []e2e.Sent
	for after := int64(0); time.Now().Before(deadline); {
		page := in.SentAfter(after, 5*time.Second)
		for _, m := range page {
			after = m.Seq
			seen = append(seen, m)
			if m.ChatJID == "local:family" && m.Reaction == "❤️" && m.ReactTo == doc && m.Text == "" {
				return
			}
		}
	}
	t.Fatalf("no reaction ❤️ to %s in /sent: %+v", doc, seen)
}

// The group's agent (confined, its folder writable) swaps media/ for a link
// to a directory the daemon could write (standing in for /etc/cron.d). The
// next file sent to the chat is not written through it: the link is
// removed, the file saved in a real media/, and the main chat alerted of a
// filesystem violation.
func TestMediaLinkPlanted(t *testing.T) {
	cron := t.TempDir()
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family")
	in.Start()
	ctx := context.Background()
	media := filepath.Join(in.Layout().Group("family"), "media")
	if err := os.MkdirAll(media, 0o755); err != nil {
		t.Fatal(err)
	}
	in.Post("local:family", "Eve", "@Andy plant "+cron+" media")
	in.WaitFor("local:family", e2e.Equals("planted media"))
	if fi, err := os.Lstat(media); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the agent's link is not in place (%v, %v), so this proves nothing", fi, err)
	}
	job := []byte("* * * * * root touch /tmp/owned\n")
	id, err := in.Local.Post(ctx, local.Message{ChatJID: "local:family", Sender: "eve@local", SenderName: "Eve",
		Media: &local.Media{Type: "text/plain", Name: "job", DataBase64: base64.StdEncoding.EncodeToString(job)}})
	if err != nil {
		t.Fatal(err)
	}
	in.WaitFor("local:main", func(s string) bool {
		return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, "family") && strings.Contains(s, media)
	})
	if entries, _ := os.ReadDir(cron); len(entries) != 0 {
		t.Errorf("the daemon wrote through the group's link: %v", entries)
	}
	fi, err := os.Lstat(media)
	if err != nil || !fi.IsDir() {
		t.Fatalf("media/ is %v (%v), want a real directory", fi, err)
	}
	if got, err := os.ReadFile(filepath.Join(media, id+".txt")); err != nil || !bytes.Equal(got, job) {
		t.Errorf("the file was not saved in the real media/: %q, %v", got, err)
	}
}

func random(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// lastText is the text of the last message in chat.
func lastText(all []e2e.Sent, chat string) string {
	texts := e2e.InChat(all, chat)
	return texts[len(texts)-1]
}
