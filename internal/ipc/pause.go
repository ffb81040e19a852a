package ipc

// A group whose IPC directories hold more than pauseLimit waiting files is
// flooding, not asking: its IPC is paused. The owner is told once; until
// a scan finds its directories empty, each of its files is deleted unread
// (a batch at a time, each batch one audit record naming the count), so
// its backlog drains at the cost of a directory listing and an unlink per
// file, and the rest of the watcher's time goes to the other groups. Its
// chat is answered as before: only what its agent writes to ipc/ waits.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

// pauseLimit is the number of waiting IPC files past which a group's IPC
// is paused.
const pauseLimit = 10000

// checkBacklog pauses folder's IPC when waiting files are past pauseLimit
// (telling the main chat) and lifts the pause when none wait. Only Run's
// goroutine calls it.
func (w *Watcher) checkBacklog(ctx context.Context, folder string, waiting int) {
	switch {
	case waiting == 0 && w.paused[folder]:
		delete(w.paused, folder)
		w.cfg.Log.Info().Str("group", folder).Msg("ipc: the group's IPC directory is empty again; its requests are handled again")
	case waiting > pauseLimit && !w.paused[folder]:
		text := fmt.Sprintf("[SANDBOX ALERT] group %q has %d IPC files waiting, more than %d: its agent is flooding nanoclawd. "+
			"Its IPC requests are paused: its files are deleted unread and audited until none are left. "+
			"Its chat is answered as before. What it tried: `nanoclawd violations --group %s`.", folder, waiting, pauseLimit, folder)
		tx, err := w.cfg.DB.Begin(ctx)
		if err == nil {
			err = w.fx.noticeTx(ctx, tx, folder, text)
			if err == nil {
				err = tx.Commit()
			}
			tx.Rollback()
		}
		// Paused even if the notice failed: the flood must not wait for it.
		w.paused[folder] = true
		w.cfg.Log.Warn().Str("group", folder).Int("waiting", waiting).Msg("ipc: the group's IPC is paused: more files wait than it could mean")
		w.logErr(ctx, err)
	}
}

// drain deletes the files refs name, all of paused groups, unread: first
// one audit record per group naming how many are there, then the files,
// so a crash between the two audits more than it deleted, never less.
func (w *Watcher) drain(ctx context.Context, refs []ref) {
	ds := w.newDirs()
	defer ds.close()
	byFolder := map[string][]ref{}
	var order []string
	for _, r := range refs {
		dir, err := ds.get(ctx, r.folder, r.sub)
		if err != nil || dir == nil {
			w.logErr(ctx, err)
			continue
		}
		if _, err := dir.Root().Lstat(r.name); err != nil {
			continue // gone already (an event after the scan that drained it)
		}
		if byFolder[r.folder] == nil {
			order = append(order, r.folder)
		}
		byFolder[r.folder] = append(byFolder[r.folder], r)
	}
	if len(order) == 0 {
		return
	}
	tx, err := w.cfg.DB.Begin(ctx)
	if err != nil {
		w.logErr(ctx, fmt.Errorf("ipc: drain: %w", err))
		return
	}
	defer tx.Rollback()
	for _, folder := range order {
		rs := byFolder[folder]
		v := security.Violation{Time: w.now().UTC(), Group: folder, Kind: security.KindIPC, Tool: "ipc", Target: "ipc/" + folder,
			Detail: fmt.Sprintf("%d files deleted unread (ipc/%s to ipc/%s): the group's IPC is paused while more than %d files wait",
				len(rs), rs[0], rs[len(rs)-1], pauseLimit),
			Action: "blocked", Rule: "ipc"}
		if err := w.fx.refusedTx(ctx, tx, 0, v, false); err != nil {
			w.logErr(ctx, fmt.Errorf("ipc: drain: %w", err))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		w.logErr(ctx, fmt.Errorf("ipc: drain: %w", err))
		return
	}
	for _, folder := range order {
		for _, r := range byFolder[folder] {
			dir, _ := ds.get(ctx, r.folder, r.sub)
			if err := dir.Remove(r.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				w.logErr(ctx, fmt.Errorf("ipc: drain %s: %w", r, err))
			}
		}
	}
	w.fx.committed(ctx)
}

// unpaused is refs without the files of paused groups, which it drains.
// A file recorded already (its effects owed since a crash) is finished as
// usual instead.
func (w *Watcher) unpaused(ctx context.Context, refs []ref) []ref {
	if len(w.paused) == 0 {
		return refs
	}
	var keep, drop []ref
	for _, r := range refs {
		if w.paused[r.folder] && w.open[r] == nil {
			drop = append(drop, r)
		} else {
			keep = append(keep, r)
		}
	}
	if len(drop) > 0 {
		w.drain(ctx, drop)
	}
	return keep
}
