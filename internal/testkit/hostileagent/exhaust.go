package main

// HOSTILE_DISK: "WHERE MiB", when the prompt says "fill the disk" — write up to MiB MiB, or until the disk is
// full: "folder" (a file in its folder), "home" (a file in $HOME, which
// stays after the run, where a look at the folder alone misses it) or
// "unlinked" (a file in its folder, unlinked at once and held open, which
// no directory walk finds). The report goes out as a
// frame, then the agent waits to be stopped, the file still open.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

func fillDisk(spec, prompt string, say func(string, ...any)) bool {
	where, n, _ := strings.Cut(strings.TrimSpace(spec), " ")
	mib, _ := strconv.Atoi(n)
	if mib <= 0 || !strings.Contains(prompt, "fill the disk") {
		return false
	}
	path := "fill-" + where + ".bin"
	if where == "home" {
		path = filepath.Join(os.Getenv("HOME"), "fill.bin")
	}
	f, err := os.Create(path)
	if err != nil {
		say("DISK %s: refused: %v", where, err)
		return false
	}
	if where == "unlinked" {
		os.Remove(path)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i) // not zeros: nothing may store it sparse
	}
	got := 0
	for ; got < mib; got++ {
		if _, err = f.Write(chunk); err != nil {
			break
		}
	}
	say("DISK %s %d of %d MiB: %v", where, got, mib, err)
	runtimeKeep = f // held open past this function, until the process ends
	return true
}

var runtimeKeep *os.File

// holdOn keeps the process, and its open file, until the daemon stops it.
func holdOn() { time.Sleep(time.Minute) }

// HOSTILE_FLOOD: N — write N tiny message requests with a bad token into
// its IPC directory, each under its own name (so that no two refusals
// fold together), as .json.tmp renamed to .json like the MCP tools do.
func flood(n int, say func(string, ...any)) {
	dir := filepath.Join(os.Getenv(protocol.EnvIPCDir), "messages")
	body := []byte(`{"type":"message","chatJid":"` + os.Getenv(protocol.EnvChatJID) + `","text":"never-flooded","token":"forged-token"}`)
	got := 0
	var err error
	for ; got < n; got++ {
		name := filepath.Join(dir, "f"+strconv.Itoa(1000000+got)+".json")
		if err = os.WriteFile(name+".tmp", body, 0o600); err != nil {
			break
		}
		if err = os.Rename(name+".tmp", name); err != nil {
			break
		}
	}
	say("FLOOD %d of %d files: %v", got, n, err)
}
