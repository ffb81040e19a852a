package ipc

import (
	"context"
	"fmt"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

// maxAttempts bounds the tries of a file effect that keeps failing (a file
// that cannot be removed, say) before its entry is given up.
const maxAttempts = 5

// finish does what is left of entries once their records committed: the
// file removed (carried out) or quarantined with its reason (refused), the
// verdict written for the agent, a new group watched, the snapshot of
// groups refreshed; then the entries are marked done and the daemon woken.
// All of it is safe to repeat, so a crash before the mark only repeats it.
func (w *Watcher) finish(ctx context.Context, entries []*entry) {
	if len(entries) == 0 {
		return
	}
	var finished []*entry
	var ids []int64
	tasks := false
	ds := w.newDirs()
	defer ds.close()
	for _, e := range entries {
		if err := w.finishOne(ctx, e, ds); err != nil {
			w.failed(ctx, e, err)
			continue
		}
		finished, ids = append(finished, e), append(ids, e.id)
		switch e.typ {
		case protocol.TypeScheduleTask, protocol.TypePauseTask, protocol.TypeResumeTask, protocol.TypeCancelTask, protocol.TypeUpdateTask:
			tasks = true
		}
	}
	// Marked before the daemon is woken, so that the outbox's writes for
	// these files do not contend with this one (SQLite's busy wait sleeps
	// whole milliseconds).
	if err := w.markDone(ctx, ids); err != nil {
		w.logErr(ctx, err) // they stay open and are finished again
	} else {
		for _, e := range finished {
			delete(w.open, e.ref)
		}
	}
	if tasks {
		w.cfg.Tasks.Changed()
	}
	w.fx.committed(ctx)
}

func (w *Watcher) finishOne(ctx context.Context, e *entry, ds *dirs) error {
	// A search is answered before its file goes: if the database fails,
	// the file stays and the search is tried again.
	verdict, err := w.verdict(ctx, e)
	if err != nil {
		return err
	}
	var dir *groupfs.Dir // the file's directory, when the file is there
	if e.present {
		d, err := ds.get(ctx, e.folder, e.sub)
		if err != nil {
			return err
		}
		dir = d // nil: swapped for a link since, so the file is gone with it
	}
	if e.status == statusRefused {
		if err := w.quarantine(e, dir, e.reason); err != nil {
			return err
		}
	} else {
		if dir != nil {
			if err := dir.Remove(e.name); err != nil {
				return err
			}
		}
		if e.newFolder != "" {
			if err := w.Watch(e.newFolder); err != nil {
				return err
			}
		}
		if e.typ == protocol.TypeRefreshGroups {
			if err := w.fx.refreshGroups(ctx); err != nil {
				return err
			}
		}
	}
	w.logErr(ctx, writeVerdict(ctx, ds, e.folder, e.name, verdict))
	return nil
}

// failed counts a failed try of e's file effects; they are tried again at
// the next rescan, until the maxAttempts-th try gives up.
func (w *Watcher) failed(ctx context.Context, e *entry, cause error) {
	e.attempts++
	w.logErr(ctx, fmt.Errorf("ipc file %s (attempt %d of %d): %w", e.ref, e.attempts, maxAttempts, cause))
	done := e.attempts >= maxAttempts
	if _, err := w.cfg.DB.ExecContext(ctx, `UPDATE ipc_journal SET attempts = ?, done = ? WHERE id = ?`, e.attempts, done, e.id); err != nil {
		w.logErr(ctx, fmt.Errorf("journal: %w", err))
		return
	}
	if done {
		delete(w.open, e.ref)
	}
}
