package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// askAPI sends each line of HOSTILE_API, a Messages request body, to the
// model API as the agent sees it ($ANTHROPIC_BASE_URL, the relay) with the
// placeholder it holds, and reports what came back: "API i: STATUS BODY".
// The bodies are what the SDK would never send on its own: URLs for the
// API to fetch, remote MCP servers, web tools with domains of their own.
func askAPI(bodies []string, say func(string, ...any)) {
	base := strings.TrimSuffix(os.Getenv("ANTHROPIC_BASE_URL"), "/")
	client := &http.Client{Timeout: 30 * time.Second}
	for i, body := range bodies {
		req, err := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(body))
		if err != nil {
			say("API %d: %v", i, err)
			continue
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Anthropic-Version", "2023-06-01")
		req.Header.Set("X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"))
		resp, err := client.Do(req)
		if err != nil {
			say("API %d: %v", i, err)
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		say("API %d: %d %s", i, resp.StatusCode, strings.ReplaceAll(string(b), "\n", " "))
	}
}
