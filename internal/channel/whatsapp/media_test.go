package whatsapp

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mau.fi/whatsmeow"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

func copyOf(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "copy")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A PNG goes out as an ImageMessage and anything else as a
// DocumentMessage under its name, each uploaded as the matching media
// type, with the text (formatted, prefixed) as its caption and the upload's
// keys and hashes copied in, under the message's own id.
func TestSendFileBuildsImageAndDocumentMessages(t *testing.T) {
	c := New(Options{AssistantName: "Andy"})
	ctx := context.Background()

	up, f := &fakeMedia{}, &fakeSender{}
	png := channel.Outgoing{ID: "inst-1", ChatJID: family.String(), Text: "**the** chart",
		File: &channel.Attachment{Name: "chart.png", MIME: "image/png", Path: copyOf(t, "png bytes")}}
	if err := c.sendText(ctx, f, up, family, png); err != nil {
		t.Fatal(err)
	}
	if string(up.uploaded) != "png bytes" || up.kind != whatsmeow.MediaImage {
		t.Errorf("uploaded %q as %q, want the copy's bytes as %q", up.uploaded, up.kind, whatsmeow.MediaImage)
	}
	if len(f.sent) != 1 || f.sent[0].id != MessageID("inst-1") {
		t.Fatalf("sent %+v", f.sent)
	}
	im := f.sent[0].msg.GetImageMessage()
	if im == nil || f.sent[0].msg.GetConversation() != "" || f.sent[0].msg.GetDocumentMessage() != nil {
		t.Fatalf("sent %v, want an ImageMessage alone", f.sent[0].msg)
	}
	if im.GetCaption() != "Andy: *the* chart" || im.GetMimetype() != "image/png" || im.GetURL() != "https://mmg.whatsapp.net/up" ||
		im.GetDirectPath() != "/v/t62/up" || !bytes.Equal(im.GetMediaKey(), []byte("key")) ||
		!bytes.Equal(im.GetFileEncSHA256(), []byte("enc")) || !bytes.Equal(im.GetFileSHA256(), []byte("sha")) || im.GetFileLength() != 9 {
		t.Errorf("ImageMessage %v", im)
	}

	up, f = &fakeMedia{}, &fakeSender{}
	pdf := channel.Outgoing{ID: "inst-2", ChatJID: family.String(), Text: "the report",
		File: &channel.Attachment{Name: "report.pdf", MIME: "application/pdf", Path: copyOf(t, "%PDF-1.4")}}
	if err := c.sendText(ctx, f, up, family, pdf); err != nil {
		t.Fatal(err)
	}
	doc := f.sent[0].msg.GetDocumentMessage()
	if up.kind != whatsmeow.MediaDocument || doc == nil || doc.GetCaption() != "Andy: the report" || doc.GetFileName() != "report.pdf" ||
		doc.GetTitle() != "report.pdf" || doc.GetMimetype() != "application/pdf" || doc.GetFileLength() != 8 ||
		!bytes.Equal(doc.GetMediaKey(), []byte("key")) || doc.GetDirectPath() != "/v/t62/up" {
		t.Errorf("uploaded as %q, sent %v; want a DocumentMessage named report.pdf", up.kind, f.sent[0].msg)
	}
	// Only the types every client shows inline are pictures.
	up, f = &fakeMedia{}, &fakeSender{}
	gif := channel.Outgoing{ID: "inst-3", Text: "anim",
		File: &channel.Attachment{Name: "a.gif", MIME: "image/gif", Path: copyOf(t, "GIF89a")}}
	if err := c.sendText(ctx, f, up, family, gif); err != nil || f.sent[0].msg.GetDocumentMessage() == nil {
		t.Errorf("a GIF went out as %v (%v), want a document", f.sent[0].msg, err)
	}
}

// A long caption: the file goes with the first part, the rest follow as
// text. A failed upload sends nothing (retried later); a copy that is gone
// can never be sent.
func TestSendFileLongCaptionAndFailures(t *testing.T) {
	c := New(Options{AssistantName: "Andy", OwnNumber: true})
	ctx := context.Background()
	para := strings.Repeat("x", maxPart-10)
	m := channel.Outgoing{ID: "inst-4", Text: para + "\n\n" + para,
		File: &channel.Attachment{Name: "r.pdf", MIME: "application/pdf", Path: copyOf(t, "%PDF")}}

	up, f := &fakeMedia{fail: errors.New("media upload failed with status code 500")}, &fakeSender{}
	if err := c.sendText(ctx, f, up, family, m); err == nil || len(f.sent) != 0 {
		t.Fatalf("failed upload: err %v, sent %d messages; want an error and nothing sent", err, len(f.sent))
	}
	up.fail = nil
	if err := c.sendText(ctx, f, up, family, m); err != nil {
		t.Fatal(err)
	}
	if len(f.sent) != 2 || f.sent[0].msg.GetDocumentMessage().GetCaption() != para || f.sent[1].text != para ||
		f.sent[0].id != MessageID("inst-4/0") || f.sent[1].id != MessageID("inst-4/1") {
		t.Errorf("sent %d messages (%v); want the document with part 1, then part 2 as text", len(f.sent), f.sent)
	}

	m.ID, m.File.Path = "inst-5", filepath.Join(t.TempDir(), "gone")
	if err := c.sendText(ctx, &fakeSender{}, up, family, m); !errors.Is(err, channel.ErrUndeliverable) {
		t.Errorf("a missing copy: %v, want ErrUndeliverable", err)
	}
	if err := c.sendText(ctx, &fakeSender{}, nil, family, m); !errors.Is(err, channel.ErrUnavailable) {
		t.Errorf("no client to upload with: %v, want ErrUnavailable", err)
	}
}
