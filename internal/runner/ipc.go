package runner

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// The agent's input/ lies in its IPC directory, which it may change at any
// moment: it is only ever reached through groupfs, so a link the agent put
// there is removed (and reported to rep) rather than written through.

// FollowUp hands text to the agent running for ipcDir as
// <ipcDir>/input/<time>-<rand>.json = {"type":"message","text":…}. The file
// is written under a temporary name and renamed, so the agent never reads
// half of it; names sort in the order they were written. It returns the
// file's path: the agent deletes the file when it takes the follow-up.
func FollowUp(ctx context.Context, ipcDir, text string, rep security.Reporter) (string, error) {
	in, err := openInput(ctx, ipcDir, rep)
	if err != nil {
		return "", fmt.Errorf("follow-up: %w", err)
	}
	defer in.Close()
	b, err := json.Marshal(protocol.FollowUp{Type: protocol.FollowUpMessage, Text: text})
	if err != nil {
		return "", fmt.Errorf("follow-up: %w", err)
	}
	name := fmt.Sprintf("%019d-%s.json", time.Now().UnixNano(), strings.ToLower(rand.Text()[:8]))
	if err := in.Put(name, b, 0o644); err != nil {
		return "", fmt.Errorf("follow-up: %w", err)
	}
	return filepath.Join(in.Path(), name), nil
}

// Close writes the empty <ipcDir>/input/_close that asks the agent to finish.
func Close(ctx context.Context, ipcDir string, rep security.Reporter) error {
	in, err := openInput(ctx, ipcDir, rep)
	if err != nil {
		return fmt.Errorf("close: %w", err)
	}
	defer in.Close()
	if err := in.Put(layout.CloseFile, nil, 0o644); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return nil
}

// clearInput empties <ipcDir>/input before a run: a _close left over from the
// last run would end the new agent at once, and follow-ups the last agent
// never read are in the new prompt already (the cursor did not pass them).
func clearInput(ctx context.Context, ipcDir string, rep security.Reporter) error {
	in, err := openInput(ctx, ipcDir, rep)
	if err != nil {
		return fmt.Errorf("the agent input directory: %w", err)
	}
	defer in.Close()
	if _, err := in.RemoveFiles(nil); err != nil {
		return fmt.Errorf("clearing stale agent input: %w", err)
	}
	return nil
}

func openInput(ctx context.Context, ipcDir string, rep security.Reporter) (*groupfs.Dir, error) {
	return groupfs.OpenSub(ctx, layout.IPCDir(ipcDir).Input(), filepath.Base(ipcDir), 0o755, rep)
}
