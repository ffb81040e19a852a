package ipc

import (
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

// writeVerdict answers the request file name of folder in its results/,
// if the MCP server made one. A group's IPC dir is the agent's to write,
// so the verdict goes through groupfs (ds): a results dir or file the agent
// made a symlink cannot send the daemon's write anywhere else.
func writeVerdict(ctx context.Context, ds *dirs, folder, name string, v protocol.Verdict) error {
	dir, err := ds.get(ctx, folder, layout.ResultsDir)
	if err != nil || dir == nil {
		return err
	}
	data, _ := json.Marshal(v)
	// Readable by the run, which may be another user than the daemon; the
	// group's IPC dir (its own, 0700) keeps everyone else out.
	return dir.Put(name, data, 0o644)
}

// results opens folder's results dir, if the MCP server made one (nil if
// not, or if a link stood there: removed and reported).
func (w *Watcher) results(ctx context.Context, folder string) (*groupfs.Dir, error) {
	top, err := w.ipcDir(folder)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	return top.Existing(ctx, layout.ResultsDir)
}

// ipcDir opens folder's IPC directory.
func (w *Watcher) ipcDir(folder string) (*groupfs.Dir, error) {
	return groupfs.Open(string(w.cfg.Layout.IPC(folder)), folder, 0o700, w.cfg.Reporter)
}

// pruneVerdicts removes answers nobody picked up within a minute.
func (w *Watcher) pruneVerdicts(ctx context.Context, folder string) {
	dir, err := w.results(ctx, folder)
	if err != nil || dir == nil {
		w.logErr(ctx, err)
		return
	}
	defer dir.Close()
	cutoff := w.now().Add(-time.Minute)
	_, err = dir.RemoveFiles(func(fi fs.FileInfo) bool { return fi.Mode().IsRegular() && fi.ModTime().Before(cutoff) })
	w.logErr(ctx, err)
}

// refusalReason is the part of a refusal the agent is told: the first
// line of the daemon's reason.
func refusalReason(detail string) string {
	detail, _, _ = strings.Cut(detail, "\n")
	return detail
}
