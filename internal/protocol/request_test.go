package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
)

// decode is how the daemon and the MCP server decode a request.
func decode(data []byte) (protocol.Request, error) {
	return protocol.DecodeRequest(data, scheduler.Validate)
}

func TestDecode(t *testing.T) {
	tok := `,"token":"t"`
	tests := []struct {
		in   string
		want error // nil = accepted
	}{
		{`{"type":"message","chatJid":"a@g.us","text":"hi"` + tok + `}`, nil},
		{`{"type":"message","chatJid":"a@g.us","text":"hi","file":"media/cat.png"` + tok + `}`, nil},
		{`{"type":"message","chatJid":"a@g.us","text":"hi","file":""` + tok + `}`, protocol.ErrField},
		{`{"type":"message","chatJid":"a@g.us","text":"hi","file":true` + tok + `}`, protocol.ErrField},
		{"{\"type\":\"message\",\"chatJid\":\"a@g.us\",\"text\":\"hi\",\"file\":\"a\\u0000b\"" + tok + "}", protocol.ErrField},
		{`{"type":"refresh_groups","file":"x"` + tok + `}`, protocol.ErrField},
		{`{"type":"schedule_task","prompt":"p","schedule_type":"once","schedule_value":"2030-01-01T09:00:00","context_mode":"isolated"` + tok + `}`, nil},
		{`{"type":"update_task","taskId":"t1","prompt":"p"` + tok + `}`, nil},
		{`{"type":"update_task","taskId":"t1","schedule_value":"0 9 * * *"` + tok + `}`, nil}, // type taken from the task
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a_b-1","requiresTrigger":false` + tok + `}`, nil},
		{`{"type":"refresh_groups"` + tok + `}`, nil},
		{``, protocol.ErrSyntax},
		{`[]`, protocol.ErrSyntax},
		{`"x"`, protocol.ErrSyntax},
		{`{"type":"refresh_groups"` + tok + `}{}`, protocol.ErrSyntax},
		{`{"type":"refresh_groups"` + tok + `,"token":"u"}`, protocol.ErrSyntax},
		{`{"type":"refresh_groups","nested":{}` + tok + `}`, protocol.ErrSyntax},
		{`{"type":"refresh_groups","n":1` + tok + `}`, protocol.ErrSyntax},
		{`{"type":"refresh_groups","token":null}`, protocol.ErrSyntax},
		{"{\"type\":\"refresh_groups\",\"token\":\"\xff\"}", protocol.ErrSyntax},
		{`{"type":"refresh_groups"}`, protocol.ErrNoToken},
		{`{"type":"refresh_groups","token":""}`, protocol.ErrNoToken},
		{`{"type":"refresh_groups","token":true}`, protocol.ErrNoToken},
		{`{"Type":"refresh_groups"` + tok + `}`, protocol.ErrUnknownType},
		{`{"type":"shell"` + tok + `}`, protocol.ErrUnknownType},
		{`{"type":"message","chatJid":"a@g.us"` + tok + `}`, protocol.ErrField},
		{`{"type":"message","chatJid":"a@g.us","text":""` + tok + `}`, protocol.ErrField},
		{`{"type":"message","chatJid":"a@g.us","text":"x","ChatJid":"b@g.us"` + tok + `}`, protocol.ErrField},
		{`{"type":"message","chatJid":"a b","text":"x"` + tok + `}`, protocol.ErrField},
		{`{"type":"message","chatJid":"a@g.us","text":true` + tok + `}`, protocol.ErrField},
		{`{"type":"schedule_task","prompt":"p","schedule_type":"cron","schedule_value":"* *","context_mode":"group"` + tok + `}`, protocol.ErrField},
		{`{"type":"schedule_task","prompt":"p","schedule_type":"once","schedule_value":"2030-01-01T09:00:00"` + tok + `}`, protocol.ErrField},
		{`{"type":"update_task","taskId":"t1","schedule_type":"cron"` + tok + `}`, protocol.ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"../a"` + tok + `}`, protocol.ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"GLOBAL"` + tok + `}`, protocol.ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","requiresTrigger":"no"` + tok + `}`, protocol.ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":["4917012345","4917099999"]` + tok + `}`, nil},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":[]` + tok + `}`, protocol.ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":[""]` + tok + `}`, protocol.ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":"4917012345"` + tok + `}`, protocol.ErrField},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":[1]` + tok + `}`, protocol.ErrSyntax},
		{`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":[["x"]]` + tok + `}`, protocol.ErrSyntax},
		{`{"type":"message","chatJid":"a@g.us","text":"hi","senders":["x"]` + tok + `}`, protocol.ErrField},
		{`{"type":"reaction","chatJid":"a@g.us","messageId":"3EB0C4A1F2","emoji":"👍"` + tok + `}`, nil},
		{`{"type":"reaction","chatJid":"a@g.us","messageId":"3EB0C4A1F2"` + tok + `}`, protocol.ErrField},
		{`{"type":"reaction","chatJid":"a@g.us","messageId":"3EB0","emoji":"👍","text":"x"` + tok + `}`, protocol.ErrField},
		{`{"type":"reaction","chatJid":"a@g.us","messageId":"3EB0 x","emoji":"👍"` + tok + `}`, protocol.ErrField},
		{`{"type":"reaction","chatJid":"a@g.us","messageId":"3EB0","emoji":"` + strings.Repeat("👍", 20) + `"` + tok + `}`, protocol.ErrField},
		{`{"type":"message","chatJid":"a@g.us","text":"hi","emoji":"👍"` + tok + `}`, protocol.ErrField},
	}
	for _, tc := range tests {
		req, err := decode([]byte(tc.in))
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Decode(%s) = %v; want %v", tc.in, err, tc.want)
		}
		if err == nil && req.Token != "t" {
			t.Errorf("Decode(%s): token %q", tc.in, req.Token)
		}
	}
}

// register_group's senders (offered by the MCP tool) reach the request.
func TestDecodeSenders(t *testing.T) {
	req, err := decode([]byte(`{"type":"register_group","jid":"a@g.us","name":"A","folder":"a","senders":["4917012345","4917099999"],"token":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(req.Senders, ",") != "4917012345,4917099999" {
		t.Errorf("senders %q", req.Senders)
	}
}
