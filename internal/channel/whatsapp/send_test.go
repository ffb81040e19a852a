package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// fakeSender stands in for whatsmeow's SendMessage: fail decides per call.
type fakeSender struct {
	client *whatsmeow.Client // for BuildReaction
	fail   func(n int, id types.MessageID) error
	sent   []sentMsg
	n      int
}

type sentMsg struct {
	id   types.MessageID
	text string
	msg  *waE2E.Message
}

// BuildReaction is whatsmeow's own, from a client over a real store.
func (f *fakeSender) BuildReaction(chat, sender types.JID, id types.MessageID, reaction string) *waE2E.Message {
	return f.client.BuildReaction(chat, sender, id, reaction)
}

func (f *fakeSender) SendMessage(ctx context.Context, to types.JID, m *waE2E.Message, extra ...whatsmeow.SendRequestExtra) (whatsmeow.SendResponse, error) {
	f.n++
	if f.fail != nil {
		if err := f.fail(f.n, extra[0].ID); err != nil {
			return whatsmeow.SendResponse{}, err
		}
	}
	f.sent = append(f.sent, sentMsg{extra[0].ID, m.GetConversation(), m})
	return whatsmeow.SendResponse{ID: extra[0].ID}, nil
}

// A long reply goes out as several messages cut between paragraphs, with
// ids derived from the outbox key; when a later part fails, the retry of
// the whole message sends only the parts WhatsApp has not taken.
func TestSendSplitsLongTextWithDerivedIDs(t *testing.T) {
	c := New(Options{AssistantName: "Andy"})
	para := strings.Repeat("x", maxPart-10)
	m := channel.Outgoing{ID: "inst-7", ChatJID: family.String(), Text: para + "\n\n**second**\n\n" + para}
	f := &fakeSender{fail: func(n int, _ types.MessageID) error {
		if n == 2 {
			return errors.New("timed out waiting for message send response")
		}
		return nil
	}}
	if err := c.sendText(context.Background(), f, nil, family, m); err == nil {
		t.Fatal("sendText reported success although part 2 failed")
	}
	if err := c.sendText(context.Background(), f, nil, family, m); err != nil {
		t.Fatal(err)
	}
	if len(f.sent) != 2 {
		t.Fatalf("sent %d messages, want 2 (part 1 once, then parts 2..): %v", len(f.sent), f.sent)
	}
	if f.sent[0].text != "Andy: "+para {
		t.Errorf("part 1 = %.40q…", f.sent[0].text)
	}
	if f.sent[1].text != "*second*\n\n"+para {
		t.Errorf("part 2 = %.40q… (want the bold converted and the paragraph break kept)", f.sent[1].text)
	}
	if f.sent[0].id != MessageID("inst-7/0") || f.sent[1].id != MessageID("inst-7/1") {
		t.Errorf("part ids %s %s, want MessageID(key/0), MessageID(key/1)", f.sent[0].id, f.sent[1].id)
	}
	short := &fakeSender{}
	if err := c.sendText(context.Background(), short, nil, family, channel.Outgoing{ID: "inst-8", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if short.sent[0].id != MessageID("inst-8") || short.sent[0].text != "Andy: hi" {
		t.Errorf("short message sent as %v", short.sent[0])
	}
}

// Errors whatsmeow returns are sorted for the outbox: never deliverable,
// channel down, or unexplained.
func TestSendErrorClassification(t *testing.T) {
	c := New(Options{AssistantName: "Andy"})
	for _, tc := range []struct {
		err                        error
		undeliverable, unavailable bool
	}{
		{fmt.Errorf("failed to get group members: %w", whatsmeow.ErrNotInGroup), true, false},
		{fmt.Errorf("failed to get group members: %w", whatsmeow.ErrGroupNotFound), true, false},
		{fmt.Errorf("%w %s", whatsmeow.ErrUnknownServer, "x"), true, false},
		{errors.New("no LID found for 49170@s.whatsapp.net from server"), true, false},
		{fmt.Errorf("failed to send message node: %w", whatsmeow.ErrNotConnected), false, true},
		{whatsmeow.ErrMessageTimedOut, false, true},
		{fmt.Errorf("failed to get group members: %w", whatsmeow.ErrIQTimedOut), false, true},
		{errors.New("server returned error 479"), false, false},
		{fmt.Errorf("%w 500", whatsmeow.ErrServerReturnedError), false, false},
	} {
		f := &fakeSender{fail: func(int, types.MessageID) error { return tc.err }}
		err := c.sendText(context.Background(), f, nil, family, channel.Outgoing{ID: "k", Text: "hi"})
		if errors.Is(err, channel.ErrUndeliverable) != tc.undeliverable || errors.Is(err, channel.ErrUnavailable) != tc.unavailable {
			t.Errorf("%v: undeliverable=%v unavailable=%v, want %v %v", tc.err,
				errors.Is(err, channel.ErrUndeliverable), errors.Is(err, channel.ErrUnavailable), tc.undeliverable, tc.unavailable)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: the cause is lost in %v", tc.err, err)
		}
	}
	if err := c.Send(context.Background(), channel.Outgoing{ID: "k", ChatJID: "family", Text: "hi"}); !errors.Is(err, channel.ErrUndeliverable) {
		t.Errorf("Send to a malformed chat id = %v, want ErrUndeliverable", err)
	}
	if err := c.Send(context.Background(), channel.Outgoing{ID: "k", ChatJID: family.String(), Text: "hi"}); !errors.Is(err, channel.ErrUnavailable) {
		t.Errorf("Send while disconnected = %v, want ErrUnavailable", err)
	}
}

type notifier chan struct{}

func (n notifier) Notify() { n <- struct{}{} }

// A (re)connection wakes the outbox at once.
func TestConnectedNotifiesOutbox(t *testing.T) {
	n := make(notifier, 1)
	c, _ := newTestChannel(t, Options{Outbox: n})
	c.handleEvent(&events.Connected{})
	select {
	case <-n:
	default:
		t.Fatal("Connected did not notify the outbox")
	}
}

// An agent's reaction goes out as whatsmeow's reaction message, keyed by
// the chat, the message's id and its author (in a group, the participant),
// under the outbox's id, which is remembered so its echo counts as ours.
func TestSendReaction(t *testing.T) {
	c, _ := newTestChannel(t, Options{})
	container, _, err := openStore(context.Background(), t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer container.Close()
	f := &fakeSender{client: whatsmeow.NewClient(container.NewDevice(), nil)}
	m := channel.Outgoing{ID: "inst-9", ChatJID: family.String(), Text: "👍", ReactTo: "3EB0TARGET", ReactSender: alicePN.String()}
	if err := c.sendReaction(context.Background(), f, family, m); err != nil {
		t.Fatal(err)
	}
	if len(f.sent) != 1 {
		t.Fatalf("sent %d messages", len(f.sent))
	}
	r := f.sent[0].msg.GetReactionMessage()
	if f.sent[0].id != MessageID("inst-9") || r == nil || r.GetText() != "👍" || r.GetKey().GetID() != "3EB0TARGET" ||
		r.GetKey().GetRemoteJID() != family.String() || r.GetKey().GetParticipant() != alicePN.String() || r.GetKey().GetFromMe() {
		t.Errorf("sent %v under %s", f.sent[0].msg, f.sent[0].id)
	}
	if !c.isOwnReply(MessageID("inst-9"), "") {
		t.Error("the reaction's echo would count as the owner's")
	}
}
