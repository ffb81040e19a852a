package runner

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

// FollowUp hands text to the agent running for ipcDir as
// <ipcDir>/input/<time>-<rand>.json = {"type":"message","text":…}. The file
// is written under a temporary name and renamed, so the agent never reads
// half of it; names sort in the order they were written. It returns the
// file's path: the agent deletes the file when it takes the follow-up.
func FollowUp(ipcDir, text string) (string, error) {
	in := layout.IPCDir(ipcDir).Input()
	if err := os.MkdirAll(in, 0o755); err != nil {
		return "", fmt.Errorf("follow-up: creating %s: %w", in, err)
	}
	b, err := json.Marshal(protocol.FollowUp{Type: protocol.FollowUpMessage, Text: text})
	if err != nil {
		return "", fmt.Errorf("follow-up: %w", err)
	}
	path := filepath.Join(in, fmt.Sprintf("%019d-%s.json", time.Now().UnixNano(), strings.ToLower(rand.Text()[:8])))
	if err := atomicfile.Put(path, b, 0o644); err != nil {
		return "", fmt.Errorf("follow-up: %w", err)
	}
	return path, nil
}

// Close writes the empty <ipcDir>/input/_close that asks the agent to finish.
func Close(ipcDir string) error {
	d := layout.IPCDir(ipcDir)
	if err := os.MkdirAll(d.Input(), 0o755); err != nil {
		return fmt.Errorf("close: creating %s: %w", d.Input(), err)
	}
	if err := os.WriteFile(d.Close(), nil, 0o644); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// clearInput empties <ipcDir>/input before a run: a _close left over from the
// last run would end the new agent at once, and follow-ups the last agent
// never read are in the new prompt already (the cursor did not pass them).
func clearInput(ipcDir string) error {
	in := layout.IPCDir(ipcDir).Input()
	if err := os.MkdirAll(in, 0o755); err != nil {
		return fmt.Errorf("creating the agent input directory %s: %w", in, err)
	}
	ents, err := os.ReadDir(in)
	if err != nil {
		return fmt.Errorf("reading %s: %w", in, err)
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		if err := os.Remove(filepath.Join(in, e.Name())); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("clearing stale agent input: %w", err)
		}
	}
	return nil
}
