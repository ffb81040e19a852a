package sdkproof

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// TestMain lets the test binary stand in for `nanoclawd mcp`: the runner
// starts NANOCLAW_BIN with the single argument "mcp", and this stub records
// what it was started with, so the test can check how the run's token
// travels without depending on the real MCP server being built. Otherwise
// it runs the tests under e2e.Main, which builds the real nanoclawd for the
// daemon test and removes it afterwards.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == "mcp" {
		if err := serveStub(); err != nil {
			fmt.Fprintln(os.Stderr, "mcp stub:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	e2e.Main(m)
}

// stubCall is what the stub's send_message writes to <ipc>/stub-calls/.
type stubCall struct {
	Text   string   `json:"text"`
	Token  string   `json:"token"`
	Folder string   `json:"folder"`
	Argv   []string `json:"argv"`
}

func serveStub() error {
	s := mcp.NewServer(&mcp.Implementation{Name: "nanoclaw", Version: "stub"}, nil)
	type in struct {
		Text string `json:"text" jsonschema:"the message"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "send_message", Description: "Send a message to the chat."},
		func(_ context.Context, _ *mcp.CallToolRequest, args in) (*mcp.CallToolResult, any, error) {
			dir := filepath.Join(os.Getenv(protocol.EnvIPCDir), "stub-calls")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, nil, err
			}
			b, _ := json.Marshal(stubCall{Text: args.Text, Token: os.Getenv(protocol.EnvIPCToken),
				Folder: os.Getenv(protocol.EnvGroupFolder), Argv: os.Args})
			if err := os.WriteFile(filepath.Join(dir, "call.json"), b, 0o600); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sent"}}}, nil, nil
		})
	return s.Run(context.Background(), &mcp.StdioTransport{})
}

// argvHolding lists the processes whose command line contains s.
func argvHolding(s string) []string {
	var hits []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), s) {
			hits = append(hits, p+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return hits
}
