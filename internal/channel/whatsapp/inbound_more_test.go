package whatsapp

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waCommon"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"
)

// Edits and deletions name the message they change, built from
// whatsmeow's real protocol messages.
func TestInboundEditRevoke(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ownNumber bool
		msg       *waE2E.Message
		wantText  string
		replaces  string
		revokes   string
	}{
		{
			name: "edit",
			msg: &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
				Type: waE2E.ProtocolMessage_MESSAGE_EDIT.Enum(), Key: &waCommon.MessageKey{ID: proto.String("OLD1")},
				EditedMessage: &waE2E.Message{Conversation: proto.String("@Andy fixed typo")}}},
			wantText: "@Andy fixed typo",
			replaces: "OLD1",
		},
		{
			name: "delete",
			msg: &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
				Type: waE2E.ProtocolMessage_REVOKE.Enum(), Key: &waCommon.MessageKey{ID: proto.String("OLD2")}}},
			revokes: "OLD2",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sink := newTestChannel(t, Options{OwnNumber: tc.ownNumber})
			if !c.handleEvent(msg(family, alicePN, false, "M1", tc.msg)) {
				t.Fatal("not handled")
			}
			if len(sink.messages) != 1 {
				t.Fatalf("%d messages reached the sink, want 1", len(sink.messages))
			}
			m := sink.messages[0]
			if m.Text != tc.wantText || m.Replaces != tc.replaces || m.Revokes != tc.revokes {
				t.Errorf("got text %q replaces %q revokes %q\nwant text %q replaces %q revokes %q",
					m.Text, m.Replaces, m.Revokes, tc.wantText, tc.replaces, tc.revokes)
			}
		})
	}
}

// An undecryptable message is logged with what identifies it.
func TestUndecryptableLogged(t *testing.T) {
	var logs bytes.Buffer
	c, sink := newTestChannel(t, Options{Logger: zerolog.New(&logs)})
	info := msg(family, alicePN, false, "U1", nil).Info
	if !c.handleEvent(&events.UndecryptableMessage{Info: info, IsUnavailable: true, UnavailableType: events.UnavailableTypeViewOnce}) {
		t.Fatal("not handled")
	}
	for _, want := range []string{"U1", family.String(), "could not be decrypted", "view_once"} {
		if !contains(logs.String(), want) {
			t.Errorf("log lacks %q: %s", want, logs.String())
		}
	}
	if len(sink.messages) != 0 {
		t.Error("an undecryptable message reached the sink")
	}
}

// fakeMedia stands in for whatsmeow's media download and upload.
type fakeMedia struct {
	got  whatsmeow.DownloadableMessage
	data []byte
	// Upload: what was uploaded as what, and the error to fail with.
	uploaded []byte
	kind     whatsmeow.MediaType
	fail     error
}

func (f *fakeMedia) Download(ctx context.Context, msg whatsmeow.DownloadableMessage) ([]byte, error) {
	f.got = msg
	return f.data, nil
}

func (f *fakeMedia) Upload(ctx context.Context, data []byte, kind whatsmeow.MediaType) (whatsmeow.UploadResponse, error) {
	f.uploaded, f.kind = data, kind
	if f.fail != nil {
		return whatsmeow.UploadResponse{}, f.fail
	}
	return whatsmeow.UploadResponse{URL: "https://mmg.whatsapp.net/up", DirectPath: "/v/t62/up", MediaKey: []byte("key"),
		FileEncSHA256: []byte("enc"), FileSHA256: []byte("sha"), FileLength: uint64(len(data))}, nil
}

// A photo arrives with its caption as text and a Media that downloads the
// very ImageMessage WhatsApp sent; a photo without caption still arrives.
func TestInboundImage(t *testing.T) {
	c, sink := newTestChannel(t, Options{})
	dl := &fakeMedia{data: []byte("jpeg bytes")}
	c.media = dl
	im := &waE2E.ImageMessage{
		Caption: proto.String("@Andy what bird is this?"), Mimetype: proto.String("image/jpeg"),
		FileLength: proto.Uint64(10), URL: proto.String("https://mmg.whatsapp.net/x"), MediaKey: []byte("k"),
		DirectPath: proto.String("/v/t62/x"),
	}
	c.handleEvent(msg(family, alicePN, false, "I1", &waE2E.Message{ImageMessage: im}))
	c.handleEvent(msg(family, alicePN, false, "I2", &waE2E.Message{ImageMessage: &waE2E.ImageMessage{Mimetype: proto.String("image/png")}}))
	if len(sink.messages) != 2 {
		t.Fatalf("%d messages, want 2 (a photo without caption too)", len(sink.messages))
	}
	m := sink.messages[0]
	if m.Text != "@Andy what bird is this?" || m.Media == nil || m.Media.Kind != "image" || m.Media.MimeType != "image/jpeg" || m.Media.Size != 10 {
		t.Fatalf("message = %+v", m)
	}
	data, err := m.Media.Fetch(context.Background())
	if err != nil || string(data) != "jpeg bytes" {
		t.Fatalf("Fetch = %q, %v", data, err)
	}
	if dl.got != im {
		t.Error("Fetch did not download the message's own ImageMessage")
	}
	if sink.messages[1].Text != "" || sink.messages[1].Media == nil {
		t.Errorf("captionless photo = %+v", sink.messages[1])
	}
}

// The group list is fetched at most once a day however often WhatsApp
// reconnects; a failed fetch is retried at the next chance.
func TestGroupListCachedADay(t *testing.T) {
	clock := newFakeClock()
	c, _ := newTestChannel(t, Options{})
	c.clock = clock
	fetches := 0
	fail := false
	list := func(context.Context) ([]*types.GroupInfo, error) {
		fetches++
		if fail {
			return nil, errors.New("rate-overlimit")
		}
		return []*types.GroupInfo{{JID: family, GroupName: types.GroupName{Name: "Family"}}}, nil
	}
	if !c.groupsStale() {
		t.Fatal("no list yet, but not stale")
	}
	c.syncGroupsWith(context.Background(), list)
	if c.groupsStale() {
		t.Error("stale right after a fetch")
	}
	clock.fire(fakeTimer{d: groupSyncInterval - time.Minute, fire: make(chan time.Time, 1)})
	if c.groupsStale() {
		t.Error("stale before a day passed")
	}
	clock.fire(fakeTimer{d: time.Minute, fire: make(chan time.Time, 1)})
	if !c.groupsStale() {
		t.Error("not stale after a day")
	}
	fail = true
	c.syncGroupsWith(context.Background(), list)
	if !c.groupsStale() || fetches != 2 {
		t.Errorf("after a failed fetch: stale=%v fetches=%d, want stale and 2", c.groupsStale(), fetches)
	}
}
