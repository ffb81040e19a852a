package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

// search writes a search_history request, as the MCP tool does, and
// replies with the daemon's verdict: "search: {JSON}". verb search-in takes
// the chat first; words may end with "limit=N", "since=…" or "until=…".
// search-quoted takes one Go-quoted string, the query as it is.
func search(verb, arg string) {
	req := map[string]string{"type": protocol.TypeSearchHistory, "token": os.Getenv(protocol.EnvIPCToken)}
	if verb == "search-in" {
		req["chatJid"], arg, _ = strings.Cut(arg, " ")
	}
	var words []string
	for _, w := range strings.Fields(arg) {
		if k, v, ok := strings.Cut(w, "="); ok && (k == "limit" || k == "since" || k == "until") {
			req[k] = v
			continue
		}
		words = append(words, w)
	}
	req["query"] = strings.Join(words, " ")
	if verb == "search-quoted" {
		q, err := strconv.Unquote(arg)
		if err != nil {
			fatal("search-quoted %s: %v", arg, err)
		}
		req["query"] = q
	}
	dir := ipcDir()
	if err := os.MkdirAll(dir.Results(), 0o700); err != nil {
		fatal("search: %v", err)
	}
	name := fmt.Sprintf("%d-search.json", time.Now().UnixNano())
	b, _ := json.Marshal(req)
	if err := os.WriteFile(filepath.Join(dir.Tasks(), name+".tmp"), b, 0o600); err != nil {
		fatal("search: %v", err)
	}
	if err := os.Rename(filepath.Join(dir.Tasks(), name+".tmp"), filepath.Join(dir.Tasks(), name)); err != nil {
		fatal("search: %v", err)
	}
	v, ok := protocol.AwaitVerdict(string(dir), name, 30*time.Second)
	if !ok {
		result("search: no verdict", "")
		return
	}
	out, _ := json.Marshal(v)
	result("search: "+string(out), "")
}
