package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// writeIPC publishes an IPC file in dir (messages/ or tasks/) as the nanoclaw MCP tools do — written as .tmp, then renamed —
// named after text, and notes line in $TESTAGENT_LOG (if set) once it is
// in place.
func writeIPC(dir, text string, v map[string]string, line string) {
	name := fmt.Sprintf("%d-%s.json", time.Now().UnixNano(), strings.ReplaceAll(text, " ", "_"))
	b, _ := json.Marshal(v)
	if err := os.WriteFile(filepath.Join(dir, name+".tmp"), b, 0o600); err != nil {
		fatal("write IPC file: %v", err)
	}
	// Noted before and after it is published: an agent killed in between
	// (the daemon's kill -9 takes its agents along) may or may not have
	// published it, so a checker knows the bounds: at least the "after"
	// count is sent, at most the "before" count.
	kind, rest, _ := strings.Cut(line, " ")
	note(kind + "-begin " + rest)
	if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
		fatal("publish IPC file: %v", err)
	}
	note(line)
}

// note appends line to $TESTAGENT_LOG, if set: what the agent did, for a
// checker to compare with what the daemon made of it.
func note(line string) {
	if log := os.Getenv("TESTAGENT_LOG"); log != "" {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}
