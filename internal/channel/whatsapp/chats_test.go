package whatsapp

import (
	"context"
	"testing"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/nanoclawd/nanoclawd/internal/channel"
)

// Every message records its chat once: the sink's OnMessage records it
// (as the router does), so OnChat comes beside it only to tell a name or
// a group the sink was not told, and alone for a message with nothing to
// store.
func TestOneChatRecordPerMessage(t *testing.T) {
	c, sink := newTestChannel(t, Options{})
	if err := c.syncGroups(context.Background(), func(context.Context) ([]*types.GroupInfo, error) {
		return []*types.GroupInfo{{JID: family, GroupName: types.GroupName{Name: "Family", NameSetAt: when}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	unnamed := types.NewJID("120363000000000002", types.GroupServer)
	fromBob := func(id, pushName string) *events.Message {
		e := msg(bobLID, bobLID, false, id, text("hi"))
		e.Info.PushName = pushName
		return e
	}
	ephemeral := &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{Type: waE2E.ProtocolMessage_EPHEMERAL_SETTING.Enum()}}
	for _, tc := range []struct {
		name    string
		evt     *events.Message
		onChats int // OnChat calls for the message, besides its OnMessage
		stored  bool
	}{
		{"in a group synced by name", msg(family, alicePN, false, "C1", text("hi")), 0, true},
		{"again", msg(family, alicePN, false, "C2", text("hi")), 0, true},
		{"the first in a group not synced: it is a group", msg(unnamed, alicePN, false, "C3", text("hi")), 1, true},
		{"the next there", msg(unnamed, alicePN, false, "C4", text("hi")), 0, true},
		{"the first in a direct chat: its name", fromBob("C5", "Bob"), 1, true},
		{"the next there", fromBob("C6", "Bob"), 0, true},
		{"Bob renamed himself", fromBob("C7", "Robert"), 1, true},
		{"our own message names nobody", msg(bobLID, ownPN, true, "C8", text("hello Bob")), 0, true},
		{"nothing to store: the chat alone", msg(family, alicePN, false, "C9", ephemeral), 1, false},
	} {
		chats, messages := len(sink.chats), len(sink.messages)
		if !c.handleEvent(tc.evt) {
			t.Fatalf("%s: handleEvent failed", tc.name)
		}
		gotChats, gotStored := len(sink.chats)-chats, len(sink.messages)-messages == 1
		if gotChats != tc.onChats || gotStored != tc.stored {
			t.Errorf("%s: %d OnChat, message stored %v; want %d, %v (chats %+v)", tc.name, gotChats, gotStored, tc.onChats, tc.stored, sink.chats[chats:])
		}
		if !gotStored && gotChats != 1 {
			t.Errorf("%s: nothing stored and the chat not recorded", tc.name)
		}
	}
	if got := sink.chats[len(sink.chats)-2]; got != (channel.Chat{JID: bobLID.String(), Name: "Robert", Time: when}) {
		t.Errorf("renamed chat = %+v", got)
	}
}
