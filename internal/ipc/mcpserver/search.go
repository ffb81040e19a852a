package mcpserver

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

type searchIn struct {
	Query   string `json:"query" jsonschema:"plain words to find, all of them (e.g. plumber spring)"`
	ChatJID string `json:"chatJid,omitempty" jsonschema:"the chat to search; leave out for this group's chat"`
	Since   string `json:"since,omitempty" jsonschema:"only messages from then on: YYYY-MM-DD or an RFC 3339 time"`
	Until   string `json:"until,omitempty" jsonschema:"only messages up to then (a date includes that day): YYYY-MM-DD or an RFC 3339 time"`
	Limit   int    `json:"limit,omitempty" jsonschema:"how many messages at most, 1-100 (default 20)"`
}

// searchHistory asks the daemon, which alone reads the database, and
// lists what it found, one message a line.
func (t *tools) searchHistory(_ context.Context, _ *mcp.CallToolRequest, in searchIn) (*mcp.CallToolResult, any, error) {
	req := protocol.Request{Type: protocol.TypeSearchHistory, Query: in.Query, ChatJID: in.ChatJID, Since: in.Since, Until: in.Until}
	if in.Limit != 0 {
		req.Limit = strconv.Itoa(in.Limit) // every IPC field is a string
	}
	return t.writeFor(req, func(v protocol.Verdict) string {
		if v.Messages == nil || len(*v.Messages) == 0 {
			return fmt.Sprintf("No message holds all of: %s.", in.Query)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%d messages, newest first:\n", len(*v.Messages))
		for _, m := range *v.Messages {
			fmt.Fprintf(&b, "- [%s] %s (%s) in %s, id %s: %s\n", m.Time, m.SenderName, m.Sender, m.ChatJID, m.ID, m.Text)
		}
		return b.String()
	})
}
