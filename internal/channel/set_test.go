package channel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
)

func prefixChannel(prefix string, sent *[]string) *mock.Channel {
	return &mock.Channel{
		OwnsFn: func(jid string) bool { return strings.HasPrefix(jid, prefix) },
		SendFn: func(_ context.Context, m channel.Outgoing) error {
			*sent = append(*sent, prefix+m.Text)
			return nil
		},
		SetTypingFn: func(_ context.Context, jid string, on bool) error {
			*sent = append(*sent, prefix+"typing")
			return nil
		},
	}
}

func TestSetSendsThroughTheOwner(t *testing.T) {
	var sent []string
	var set channel.Set
	send := &set // what the outbox holds: built before the channels
	set = append(set, prefixChannel("local:", &sent), prefixChannel("wa:", &sent))
	ctx := context.Background()
	if err := send.Send(ctx, channel.Outgoing{ChatJID: "wa:1", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	send.SetTyping(ctx, "local:x", true)
	if strings.Join(sent, ",") != "wa:hi,local:typing" {
		t.Errorf("sent %v", sent)
	}
	err := send.Send(ctx, channel.Outgoing{ChatJID: "sms:1", Text: "hi"})
	if err == nil || !strings.Contains(err.Error(), "no enabled channel handles chat sms:1") {
		t.Errorf("a chat no channel owns: %v", err)
	}
}
