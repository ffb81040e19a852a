package whatsapp

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"
	"google.golang.org/protobuf/proto"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// fakeSink is a channel.Sink made of funcs; by default it records.
type fakeSink struct {
	mu       sync.Mutex
	messages []channel.Message
	chats    []channel.Chat
	msgErr   error
	chatErr  error
}

func (s *fakeSink) OnMessage(ctx context.Context, m channel.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.msgErr != nil {
		return s.msgErr
	}
	s.messages = append(s.messages, m)
	return nil
}

func (s *fakeSink) OnChat(ctx context.Context, c channel.Chat) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.chatErr != nil {
		return s.chatErr
	}
	s.chats = append(s.chats, c)
	return nil
}

var (
	ownPN    = types.NewJID("491700000001", types.DefaultUserServer)
	ownLID   = types.NewJID("90000000000001", types.HiddenUserServer)
	alicePN  = types.NewJID("491700000002", types.DefaultUserServer)
	aliceLID = types.NewJID("90000000000002", types.HiddenUserServer)
	bobLID   = types.NewJID("90000000000003", types.HiddenUserServer) // no known phone number
	family   = types.NewJID("120363000000000001", types.GroupServer)
	when     = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
)

// newTestChannel wires a Channel to a fake sink and to a real whatsmeow
// store in a temp dir that knows Alice's and our own LID.
func newTestChannel(t *testing.T, opts Options) (*Channel, *fakeSink) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	container, _, err := openStore(ctx, dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { container.Close() })
	if err := container.LIDMap.PutLIDMapping(ctx, aliceLID, alicePN); err != nil {
		t.Fatal(err)
	}
	if opts.AssistantName == "" {
		opts.AssistantName = "Andy"
	}
	opts.DataDir = dir
	opts.Clock = newFakeClock()
	c := New(opts)
	sink := &fakeSink{}
	c.sink, c.ctx, c.lids = sink, ctx, container.LIDMap
	c.own, c.ownLID = ownPN, ownLID
	return c, sink
}

func msg(chat, sender types.JID, fromMe bool, id string, m *waE2E.Message) *events.Message {
	return &events.Message{
		Info: types.MessageInfo{
			MessageSource: types.MessageSource{Chat: chat, Sender: sender, IsFromMe: fromMe, IsGroup: chat.Server == types.GroupServer},
			ID:            id,
			PushName:      "Alice",
			Timestamp:     when,
		},
		Message: m,
	}
}

func text(s string) *waE2E.Message { return &waE2E.Message{Conversation: proto.String(s)} }

func withDevice(j types.JID, device uint16) types.JID {
	j.Device = device
	return j
}

func TestInbound(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ownNumber bool
		evt       *events.Message
		sent      string // an outbox id we sent before the event arrived
		// wantChat is what OnChat is told; nil with want set: nothing, the
		// sink's OnMessage records the chat.
		wantChat *channel.Chat
		want     *channel.Message
	}{
		{
			name:     "group plain text",
			evt:      msg(family, withDevice(alicePN, 3), false, "A1", text("@Andy what's on today?")),
			wantChat: &channel.Chat{JID: family.String(), IsGroup: true, Time: when},
			want:     &channel.Message{ID: "A1", ChatJID: family.String(), SenderJID: alicePN.String(), SenderName: "Alice", Text: "@Andy what's on today?", Time: when},
		},
		{
			name: "direct chat extended text",
			evt: msg(alicePN, alicePN, false, "A2", &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
				Text: proto.String("see https://example.com"), MatchedText: proto.String("https://example.com")}}),
			wantChat: &channel.Chat{JID: alicePN.String(), Name: "Alice", Time: when},
			want:     &channel.Message{ID: "A2", ChatJID: alicePN.String(), SenderJID: alicePN.String(), SenderName: "Alice", Text: "see https://example.com", Time: when},
		},
		{
			name: "reply quoting an earlier message",
			evt: msg(family, alicePN, false, "A8", &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
				Text: proto.String("@Andy is this right?"),
				ContextInfo: &waE2E.ContextInfo{StanzaID: proto.String("B7"), Participant: proto.String("491700000002@s.whatsapp.net"),
					QuotedMessage: text("dinner at 7")}}}),
			wantChat: &channel.Chat{JID: family.String(), IsGroup: true, Time: when},
			want: &channel.Message{ID: "A8", ChatJID: family.String(), SenderJID: alicePN.String(), SenderName: "Alice", Text: "@Andy is this right?", Time: when,
				QuotedID: "B7", QuotedSender: "491700000002", QuotedText: "dinner at 7"},
		},
		{
			name: "a mention of the assistant's number calls it by name",
			evt: msg(family, alicePN, false, "A9", &waE2E.Message{ExtendedTextMessage: &waE2E.ExtendedTextMessage{
				Text:        proto.String("@" + ownPN.User + " what's the plan? cc @491700000002"),
				ContextInfo: &waE2E.ContextInfo{MentionedJID: []string{ownPN.String(), "491700000002@s.whatsapp.net"}}}}),
			wantChat: &channel.Chat{JID: family.String(), IsGroup: true, Time: when},
			want: &channel.Message{ID: "A9", ChatJID: family.String(), SenderJID: alicePN.String(), SenderName: "Alice",
				Text: "@Andy what's the plan? cc @491700000002", Time: when},
		},
		// Photos: TestInboundImage.
		{
			name: "status broadcast ignored",
			evt:  msg(types.StatusBroadcastJID, alicePN, false, "A5", text("my holiday")),
		},
		{
			name: "broadcast list ignored",
			evt:  msg(types.NewJID("1700000000", types.BroadcastServer), alicePN, false, "A6", text("to many")),
		},
		{
			name: "newsletter ignored",
			evt:  msg(types.NewJID("120363000000000009", types.NewsletterServer), alicePN, false, "A7", text("news")),
		},
		{
			name:     "LID sender in a group mapped from the store",
			evt:      msg(family, withDevice(aliceLID, 2), false, "L1", text("hi from a LID")),
			wantChat: &channel.Chat{JID: family.String(), IsGroup: true, Time: when},
			want:     &channel.Message{ID: "L1", ChatJID: family.String(), SenderJID: alicePN.String(), SenderName: "Alice", Text: "hi from a LID", Time: when},
		},
		{
			name: "LID direct chat mapped from the message's alternate address",
			evt: func() *events.Message {
				e := msg(bobLID, bobLID, false, "L2", text("hello"))
				bobPN := types.NewJID("491700000003", types.DefaultUserServer)
				e.Info.SenderAlt = bobPN
				return e
			}(),
			wantChat: &channel.Chat{JID: "491700000003@s.whatsapp.net", Name: "Alice", Time: when},
			want:     &channel.Message{ID: "L2", ChatJID: "491700000003@s.whatsapp.net", SenderJID: "491700000003@s.whatsapp.net", SenderName: "Alice", Text: "hello", Time: when},
		},
		{
			name:     "unknown LID kept as it is",
			evt:      msg(bobLID, bobLID, false, "L3", text("who am I")),
			wantChat: &channel.Chat{JID: bobLID.String(), Name: "Alice", Time: when},
			want:     &channel.Message{ID: "L3", ChatJID: bobLID.String(), SenderJID: bobLID.String(), SenderName: "Alice", Text: "who am I", Time: when},
		},
		{
			name: "owner writes in the message-yourself chat under the own LID: counts, not a bot",
			evt:  msg(ownLID, withDevice(ownLID, 12), true, "M1", text("remind me to call mum")),
			want: &channel.Message{ID: "M1", ChatJID: ownPN.String(), SenderJID: ownPN.String(), SenderName: "Alice", Text: "remind me to call mum", Time: when, FromMe: true},
		},
		{
			name:     "assistant's prefixed reply echoed back is flagged",
			evt:      msg(family, ownPN, true, "B1", text("Andy: it's sunny")),
			wantChat: &channel.Chat{JID: family.String(), IsGroup: true, Time: when},
			want:     &channel.Message{ID: "B1", ChatJID: family.String(), SenderJID: ownPN.String(), SenderName: "Alice", Text: "Andy: it's sunny", Time: when, FromMe: true, IsBot: true},
		},
		{
			name:     "a message we sent is flagged by its id even without the prefix",
			evt:      msg(family, ownPN, true, string(MessageID("outbox-7")), text("plain")),
			sent:     "outbox-7",
			wantChat: &channel.Chat{JID: family.String(), IsGroup: true, Time: when},
			want:     &channel.Message{ID: string(MessageID("outbox-7")), ChatJID: family.String(), SenderJID: ownPN.String(), SenderName: "Alice", Text: "plain", Time: when, FromMe: true, IsBot: true},
		},
		{
			name:      "own number: everything from me is the assistant",
			ownNumber: true,
			evt:       msg(family, ownPN, true, "B2", text("no prefix here")),
			wantChat:  &channel.Chat{JID: family.String(), IsGroup: true, Time: when},
			want:      &channel.Message{ID: "B2", ChatJID: family.String(), SenderJID: ownPN.String(), SenderName: "Alice", Text: "no prefix here", Time: when, FromMe: true, IsBot: true},
		},
		{
			name:      "own number: others' messages are not",
			ownNumber: true,
			evt:       msg(family, alicePN, false, "B3", text("Andy: pretending")),
			wantChat:  &channel.Chat{JID: family.String(), IsGroup: true, Time: when},
			want:      &channel.Message{ID: "B3", ChatJID: family.String(), SenderJID: alicePN.String(), SenderName: "Alice", Text: "Andy: pretending", Time: when},
		},
		{
			name:     "someone else typing the prefix is not the assistant",
			evt:      msg(family, alicePN, false, "B4", text("Andy: I am Andy")),
			wantChat: &channel.Chat{JID: family.String(), IsGroup: true, Time: when},
			want:     &channel.Message{ID: "B4", ChatJID: family.String(), SenderJID: alicePN.String(), SenderName: "Alice", Text: "Andy: I am Andy", Time: when},
		},
		{
			name: "disappearing message unwrapped by whatsmeow",
			evt: (&events.Message{
				Info: msg(family, alicePN, false, "E1", nil).Info,
				RawMessage: &waE2E.Message{EphemeralMessage: &waE2E.FutureProofMessage{Message: &waE2E.Message{
					ExtendedTextMessage: &waE2E.ExtendedTextMessage{Text: proto.String("gone in 7 days")}}}},
			}).UnwrapRaw(),
			wantChat: &channel.Chat{JID: family.String(), IsGroup: true, Time: when},
			want:     &channel.Message{ID: "E1", ChatJID: family.String(), SenderJID: alicePN.String(), SenderName: "Alice", Text: "gone in 7 days", Time: when},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, sink := newTestChannel(t, Options{OwnNumber: tc.ownNumber})
			if tc.sent != "" {
				c.rememberSent(MessageID(tc.sent))
			}
			if !c.handleEvent(tc.evt) {
				t.Fatal("handleEvent reported failure")
			}
			if tc.wantChat == nil && tc.want == nil {
				if len(sink.chats)+len(sink.messages) != 0 {
					t.Fatalf("stored %v %v, want nothing", sink.chats, sink.messages)
				}
				return
			}
			switch {
			case tc.wantChat == nil && len(sink.chats) != 0:
				t.Errorf("chats = %+v, want none", sink.chats)
			case tc.wantChat != nil && (len(sink.chats) != 1 || sink.chats[0] != *tc.wantChat):
				t.Errorf("chats = %+v, want %+v", sink.chats, *tc.wantChat)
			}
			switch {
			case tc.want == nil && len(sink.messages) != 0:
				t.Errorf("messages = %+v, want none", sink.messages)
			case tc.want != nil && (len(sink.messages) != 1 || sink.messages[0] != *tc.want):
				t.Errorf("messages = %+v\nwant       %+v", sink.messages, *tc.want)
			}
		})
	}
}

// A message is acknowledged to WhatsApp only once stored: when the sink
// fails, the handler says so, and whatsmeow withholds the ack.
func TestInboundNotAcknowledgedUntilStored(t *testing.T) {
	c, sink := newTestChannel(t, Options{})
	sink.msgErr = errors.New("disk full")
	if c.handleEvent(msg(family, alicePN, false, "X1", text("hello"))) {
		t.Error("handleEvent = true though the message was not stored")
	}
	// Alice's direct chat has a name the sink was not told: OnChat first.
	sink.msgErr, sink.chatErr = nil, errors.New("database is locked")
	if c.handleEvent(msg(alicePN, alicePN, false, "X2", text("hello"))) {
		t.Error("handleEvent = true though the chat was not stored")
	}
	sink.chatErr = nil
	if !c.handleEvent(msg(alicePN, alicePN, false, "X3", text("hello"))) || len(sink.messages) != 1 || len(sink.chats) != 2 {
		t.Errorf("retry not stored: %+v", sink.messages)
	}
}

// The handler must not return before the sink did.
func TestInboundWaitsForSink(t *testing.T) {
	c, _ := newTestChannel(t, Options{})
	release := make(chan struct{})
	entered := make(chan struct{})
	c.sink = sinkFuncs{
		onChat: func(context.Context, channel.Chat) error { return nil },
		onMessage: func(context.Context, channel.Message) error {
			close(entered)
			<-release
			return nil
		},
	}
	returned := make(chan bool, 1)
	go func() { returned <- c.handleEvent(msg(family, alicePN, false, "W1", text("hi"))) }()
	recv(t, entered)
	select {
	case <-returned:
		t.Fatal("handler returned while the sink was still storing")
	default:
	}
	close(release)
	if !recv(t, returned) {
		t.Fatal("handler failed")
	}
}

type sinkFuncs struct {
	onMessage func(context.Context, channel.Message) error
	onChat    func(context.Context, channel.Chat) error
}

func (s sinkFuncs) OnMessage(ctx context.Context, m channel.Message) error {
	return s.onMessage(ctx, m)
}
func (s sinkFuncs) OnChat(ctx context.Context, c channel.Chat) error { return s.onChat(ctx, c) }

func TestGroupNames(t *testing.T) {
	c, sink := newTestChannel(t, Options{})
	other := types.NewJID("120363000000000002", types.GroupServer)

	// At start (and daily): every joined group.
	err := c.syncGroups(context.Background(), func(context.Context) ([]*types.GroupInfo, error) {
		return []*types.GroupInfo{
			{JID: family, GroupName: types.GroupName{Name: "Family", NameSetAt: when}},
			{JID: other, GroupName: types.GroupName{Name: "Book club"}},
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A rename.
	c.handleEvent(&events.GroupInfo{JID: family, Timestamp: when.Add(time.Hour), Name: &types.GroupName{Name: "Family ❤️"}})
	// A group-info event that is not about the name changes nothing.
	c.handleEvent(&events.GroupInfo{JID: family, Timestamp: when, Topic: &types.GroupTopic{Topic: "x"}})
	// Added to a new group.
	third := types.NewJID("120363000000000003", types.GroupServer)
	c.handleEvent(&events.JoinedGroup{GroupInfo: types.GroupInfo{JID: third, GroupName: types.GroupName{Name: "Work"}}})

	want := []channel.Chat{
		{JID: family.String(), Name: "Family", IsGroup: true, Time: when},
		{JID: other.String(), Name: "Book club", IsGroup: true, Time: c.clock.Now()},
		{JID: family.String(), Name: "Family ❤️", IsGroup: true, Time: when.Add(time.Hour)},
		{JID: third.String(), Name: "Work", IsGroup: true, Time: c.clock.Now()},
	}
	if len(sink.chats) != len(want) {
		t.Fatalf("chats = %+v, want %+v", sink.chats, want)
	}
	for i := range want {
		if sink.chats[i] != want[i] {
			t.Errorf("chat %d = %+v, want %+v", i, sink.chats[i], want[i])
		}
	}
	// A message in a group whose name the sink has is only the message.
	c.handleEvent(msg(family, alicePN, false, "G1", text("hi")))
	if len(sink.chats) != len(want) || len(sink.messages) != 1 {
		t.Errorf("a message in a named group told the chat again: %+v", sink.chats[len(want):])
	}

	failing := func(context.Context) ([]*types.GroupInfo, error) { return nil, errors.New("not connected") }
	if err := c.syncGroups(context.Background(), failing); err == nil {
		t.Error("sync with a failing list returned nil")
	}
}
