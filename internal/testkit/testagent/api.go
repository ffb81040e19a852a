package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

// callAPI makes n streamed Messages API requests the way the SDK does:
// to $ANTHROPIC_BASE_URL with the credential the agent holds, reading each
// event stream to its end. It replies "api N ok: TEXT" with the streamed
// text; the first refused request ends the run with an error result
// carrying the API's message, as the SDK reports an API error.
func callAPI(n int, prompt string) { callAPIWith(n, prompt, nil, "") }

// serverTools is what "api-servertools" adds to its request: what would
// make the API itself reach the network (server tools, a remote MCP
// server) and the betas that enable them.
var serverTools = map[string]any{
	"tools": []any{
		map[string]any{"name": "notes", "input_schema": map[string]any{"type": "object"}},
		map[string]any{"type": "web_search_20250305", "name": "web_search"},
		map[string]any{"type": "web_fetch_20250910", "name": "web_fetch"},
		map[string]any{"type": "code_execution_20250825", "name": "code_execution"},
	},
	"mcp_servers": []any{map[string]any{"type": "url", "url": "https://mcp.example.net/sse", "name": "far"}},
}

const serverBetas = "mcp-client-2025-04-04,web-fetch-2025-09-10,code-execution-2025-08-25"

// callAPIWith is callAPI with extra members in each request body and an
// anthropic-beta header.
func callAPIWith(n int, prompt string, extra map[string]any, beta string) {
	base := strings.TrimSuffix(os.Getenv("ANTHROPIC_BASE_URL"), "/")
	model := os.Getenv("TESTAGENT_MODEL") // a model without a price, for tests of unpriced usage
	if model == "" {
		model = "claude-sonnet-4-5-20250929"
	}
	var text strings.Builder
	for i := 0; i < n; i++ {
		msg := map[string]any{"model": model, "max_tokens": 1024, "stream": true,
			"messages": []any{map[string]any{"role": "user", "content": prompt}}}
		for k, v := range extra {
			msg[k] = v
		}
		body, _ := json.Marshal(msg)
		req, err := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(string(body)))
		if err != nil {
			fatal("api: %v", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Anthropic-Version", "2023-06-01")
		if beta != "" {
			req.Header.Set("Anthropic-Beta", beta)
		}
		if k := os.Getenv("ANTHROPIC_API_KEY"); k != "" {
			req.Header.Set("X-Api-Key", k)
		} else if tok := os.Getenv("CLAUDE_CODE_OAUTH_TOKEN"); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			apiFailed(fmt.Sprintf("API Error: Connection error: %v", err))
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			json.Unmarshal(b, &e)
			apiFailed(fmt.Sprintf("API Error: %d %s", resp.StatusCode, e.Error.Message))
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type  string                `json:"type"`
				Delta struct{ Text string } `json:"delta"`
			}
			if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "content_block_delta" {
				text.WriteString(ev.Delta.Text)
			}
		}
		resp.Body.Close()
	}
	result(fmt.Sprintf("api %d ok: %s", n, text.String()), "")
}

func apiFailed(msg string) {
	note("api failed " + msg)
	frame(protocol.Frame{Status: protocol.StatusError, Error: msg})
	os.Exit(1)
}
