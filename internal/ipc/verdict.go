package ipc

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
)

// ResultsDir is where the daemon answers the nanoclaw MCP tools: for a
// request file messages/NAME or tasks/NAME it writes results/NAME with its
// Verdict, when the results directory exists (the MCP server makes it).
const ResultsDir = "results"

// Verdict is what became of one request.
type Verdict struct {
	Status string `json:"status"` // "sent" (carried out) or "refused"
	Reason string `json:"reason,omitempty"`
	ID     string `json:"id,omitempty"` // schedule_task: the new task's id
}

// answers writes the verdicts of one batch. A group's IPC dir is the
// agent's to write, so they are written through an os.Root: a results dir
// or file the agent made a symlink cannot send the daemon's write anywhere
// else. Each group's root is opened once per batch.
type answers struct {
	w     *Watcher
	roots map[string]*os.Root // nil: no MCP server waits for answers there
}

// write answers the request file name of folder.
func (a *answers) write(folder, name string, v Verdict) error {
	root, opened := a.roots[folder]
	if !opened {
		r, err := os.OpenRoot(filepath.Join(a.w.cfg.IPCRoot, folder))
		if err != nil {
			return err
		}
		if fi, err := r.Lstat(ResultsDir); err == nil && fi.IsDir() {
			root = r
		} else {
			r.Close()
		}
		a.roots[folder] = root
	}
	if root == nil {
		return nil
	}
	data, _ := json.Marshal(v)
	// Readable by the run, which may be another user than the daemon; the
	// group's IPC dir (its own, 0700) keeps everyone else out.
	return atomicfile.PutIn(root, filepath.Join(ResultsDir, name), data, 0o644)
}

func (a *answers) close() {
	for _, r := range a.roots {
		if r != nil {
			r.Close()
		}
	}
}

// pruneVerdicts removes answers nobody picked up within a minute.
func (w *Watcher) pruneVerdicts(folder string) {
	dir := filepath.Join(w.cfg.IPCRoot, folder, ResultsDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	cutoff := w.now().Add(-time.Minute)
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// AwaitVerdict waits up to wait for the daemon's answer to the request file
// name written in ipcDir, removes it and returns it; ok is false when none
// came in time (the file waits for the daemon).
func AwaitVerdict(ipcDir, name string, wait time.Duration) (v Verdict, ok bool) {
	path := filepath.Join(ipcDir, ResultsDir, name)
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		data, err := os.ReadFile(path)
		if err == nil && json.Unmarshal(data, &v) == nil && v.Status != "" {
			os.Remove(path)
			return v, true
		}
		if (err != nil && !errors.Is(err, fs.ErrNotExist)) || time.Now().After(deadline) {
			return v, false
		}
	}
}

// refusalReason is the part of a refusal the agent is told: the first
// line of the daemon's reason.
func refusalReason(detail string) string {
	detail, _, _ = strings.Cut(detail, "\n")
	return detail
}
