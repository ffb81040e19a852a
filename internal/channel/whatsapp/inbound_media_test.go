package whatsapp

import (
	"context"
	"reflect"
	"testing"

	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"google.golang.org/protobuf/proto"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// Voice notes, audio, documents, videos and stickers arrive as whatsmeow
// delivers them, each as a Media of its kind with the sender's type, name,
// size and length, whose Fetch downloads that very message (the download
// is the part that would reach WhatsApp's media servers).
func TestInboundMediaKinds(t *testing.T) {
	ptt := &waE2E.AudioMessage{Mimetype: proto.String("audio/ogg; codecs=opus"), PTT: proto.Bool(true), Seconds: proto.Uint32(42), FileLength: proto.Uint64(6100)}
	song := &waE2E.AudioMessage{Mimetype: proto.String("audio/mpeg"), Seconds: proto.Uint32(190), FileLength: proto.Uint64(4 << 20)}
	doc := &waE2E.DocumentMessage{Mimetype: proto.String("application/pdf"), FileName: proto.String("report.pdf"), FileLength: proto.Uint64(1258291),
		Caption: proto.String("@Andy summarise this")}
	video := &waE2E.VideoMessage{Mimetype: proto.String("video/mp4"), Seconds: proto.Uint32(12), FileLength: proto.Uint64(3 << 20), Caption: proto.String("look")}
	sticker := &waE2E.StickerMessage{Mimetype: proto.String("image/webp"), FileLength: proto.Uint64(20000)}
	for _, tc := range []struct {
		name     string
		msg      *waE2E.Message
		want     channel.Media
		text     string
		download any
	}{
		{"voice note", &waE2E.Message{AudioMessage: ptt}, channel.Media{Kind: channel.MediaVoice, MimeType: "audio/ogg; codecs=opus", Size: 6100, Seconds: 42}, "", ptt},
		{"audio", &waE2E.Message{AudioMessage: song}, channel.Media{Kind: channel.MediaAudio, MimeType: "audio/mpeg", Size: 4 << 20, Seconds: 190}, "", song},
		{"document", &waE2E.Message{DocumentMessage: doc}, channel.Media{Kind: channel.MediaDocument, MimeType: "application/pdf", Name: "report.pdf", Size: 1258291}, "@Andy summarise this", doc},
		{"video", &waE2E.Message{VideoMessage: video}, channel.Media{Kind: channel.MediaVideo, MimeType: "video/mp4", Size: 3 << 20, Seconds: 12}, "look", video},
		{"sticker", &waE2E.Message{StickerMessage: sticker}, channel.Media{Kind: channel.MediaSticker, MimeType: "image/webp", Size: 20000}, "", sticker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sink := newTestChannel(t, Options{})
			dl := &fakeMedia{data: []byte("bytes of " + tc.name)}
			c.media = dl
			if !c.handleEvent(msg(family, alicePN, false, "X1", tc.msg)) || len(sink.messages) != 1 {
				t.Fatalf("%d messages reached the sink, want 1", len(sink.messages))
			}
			m := sink.messages[0]
			if m.Media == nil {
				t.Fatalf("no media: %+v", m)
			}
			got := *m.Media
			got.Fetch = nil
			if !reflect.DeepEqual(got, tc.want) || m.Text != tc.text {
				t.Errorf("media %+v text %q, want %+v text %q", got, m.Text, tc.want, tc.text)
			}
			data, err := m.Media.Fetch(context.Background())
			if err != nil || string(data) != "bytes of "+tc.name || dl.got != tc.download {
				t.Errorf("Fetch = %q, %v; downloaded %v", data, err, dl.got)
			}
		})
	}
	// Not connected: the download says so instead of failing obscurely.
	c, sink := newTestChannel(t, Options{})
	c.handleEvent(msg(family, alicePN, false, "X2", &waE2E.Message{AudioMessage: ptt}))
	if _, err := sink.messages[0].Media.Fetch(context.Background()); err != ErrNotConnected {
		t.Errorf("Fetch without a client = %v, want ErrNotConnected", err)
	}
}

// A reaction names the message it is about, its emoji as text; one taken
// back arrives with no emoji. A reply (extended text with context info)
// names the quoted message's id, author and text; a quoted voice note
// without text is described.
func TestInboundReactionAndReply(t *testing.T) {
	c, sink := newTestChannel(t, Options{})
	react := func(id, emoji string) *waE2E.Message {
		return &waE2E.Message{ReactionMessage: &waE2E.ReactionMessage{
			Key:  &waCommon.MessageKey{RemoteJID: proto.String(family.String()), ID: proto.String("3EB0TARGET"), FromMe: proto.Bool(false)},
			Text: proto.String(emoji), SenderTimestampMS: proto.Int64(when.UnixMilli())}}
	}
	c.handleEvent(msg(family, alicePN, false, "R1", react("3EB0TARGET", "👍")))
	c.handleEvent(msg(family, alicePN, false, "R2", react("3EB0TARGET", "")))
	reply := &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String("@Andy is that right?"),
		ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String("3EB0QUOTED"), Participant: proto.String(alicePN.String()),
			QuotedMessage: &waE2E.Message{Conversation: proto.String("dinner at 7")}}}}
	c.handleEvent(msg(family, alicePN, false, "Q1", reply))
	onVoice := &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String("yes"),
		ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String("3EB0VOICE"), Participant: proto.String(alicePN.String()),
			QuotedMessage: &waE2E.Message{AudioMessage: &waE2E.AudioMessage{PTT: proto.Bool(true)}}}}}
	c.handleEvent(msg(family, alicePN, false, "Q2", onVoice))
	if len(sink.messages) != 4 {
		t.Fatalf("%d messages reached the sink, want 4 (a withdrawn reaction too)", len(sink.messages))
	}
	r, gone, q, qv := sink.messages[0], sink.messages[1], sink.messages[2], sink.messages[3]
	if r.ReactTo != "3EB0TARGET" || r.Text != "👍" || r.Media != nil || gone.ReactTo != "3EB0TARGET" || gone.Text != "" {
		t.Errorf("reactions: %+v / %+v", r, gone)
	}
	if q.QuotedID != "3EB0QUOTED" || q.QuotedSender != alicePN.User || q.QuotedText != "dinner at 7" || q.Text != "@Andy is that right?" {
		t.Errorf("reply: %+v", q)
	}
	if qv.QuotedID != "3EB0VOICE" || qv.QuotedText != "[voice note]" {
		t.Errorf("reply to a voice note: %+v", qv)
	}
}
