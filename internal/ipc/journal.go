package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// entry is one row of ipc_journal: a file recorded with its verdict, and
// what is still owed on disk for it (see effects.go).
type entry struct {
	id int64
	ref
	hash      string
	status    string // sent | refused
	typ       string // the request's type; "" when refused
	taskID    string // schedule_task: the task created
	newFolder string // register_group: the folder to watch
	reason    string // refused: why
	attempts  int    // failed tries of the file effects
	present   bool   // the file is (as far as we know) still at its path
	// search is an accepted search_history, answered in its verdict;
	// nil after a restart until the file is read again (searchOf).
	search *protocol.Search
}

func (e *entry) verdict() protocol.Verdict {
	if e.status == statusRefused {
		return protocol.Verdict{Status: statusRefused, Reason: refusalReason(e.reason)}
	}
	return protocol.Verdict{Status: statusSent, ID: e.taskID}
}

const (
	statusSent    = "sent"
	statusRefused = "refused"
)

// judged is a file read and decided, ready to be recorded.
type judged struct {
	f *file
	d decision
}

// handle carries out the files refs name, as few transactions as the
// batch allows: read and decide each, record them all with their database
// effects in one transaction, then do what is left on disk. A file that
// cannot be read or decided now stays in place for the next rescan.
func (w *Watcher) handle(ctx context.Context, refs ...ref) {
	refs = w.unpaused(ctx, refs)
	for len(refs) > 0 && ctx.Err() == nil {
		todo := make([]judged, 0, len(refs))
		var leftovers []*entry
		v := w.newView()
		n := 0
		for n < len(refs) {
			r := refs[n]
			n++
			f, err := v.read(ctx, r)
			if err != nil {
				w.logErr(ctx, fmt.Errorf("ipc file %s: %w", r, err))
				continue
			}
			if f == nil {
				continue // gone: handled already
			}
			if e := w.open[r]; e != nil {
				if e.hash == f.hash {
					e.present = true
					v.reread(ctx, e, f)
					leftovers = append(leftovers, e) // recorded before a crash
					continue
				}
				// The recorded file is gone and a new one took its name:
				// finish the old record without touching the new file.
				e.present = false
				w.finish(ctx, []*entry{e})
			}
			d, err := v.decide(ctx, f)
			if err != nil {
				w.logErr(ctx, fmt.Errorf("ipc file %s: %w", r, err))
				continue
			}
			todo = append(todo, judged{f, d})
			if d.accept && d.req.Type == protocol.TypeRegisterGroup {
				break // the files after it are decided against the new registry
			}
		}
		refs = refs[n:]
		v.dirs.close()
		recorded := w.record(ctx, todo)
		dropUnrecorded(todo, recorded)
		w.finish(ctx, append(leftovers, recorded...))
	}
}

// dropUnrecorded removes the copies of message files whose record did not
// commit: the file stays in place and is decided (and copied) again.
func dropUnrecorded(todo []judged, recorded []*entry) {
	done := make(map[ref]bool, len(recorded))
	for _, e := range recorded {
		done[e.ref] = true
	}
	for _, j := range todo {
		if j.d.file != nil && !done[j.f.ref] {
			os.Remove(j.d.file.Path)
		}
	}
}

// record writes the journal rows of todo and does their database effects
// in one transaction. If that fails, each file is tried in a transaction
// of its own, so one that cannot be recorded does not hold up the others;
// it stays in place for the next rescan.
func (w *Watcher) record(ctx context.Context, todo []judged) []*entry {
	if len(todo) == 0 {
		return nil
	}
	entries, err := w.recordBatch(ctx, todo)
	if err == nil || len(todo) == 1 {
		w.logErr(ctx, err)
		return entries
	}
	entries = nil
	for _, j := range todo {
		es, err := w.recordBatch(ctx, []judged{j})
		w.logErr(ctx, err)
		entries = append(entries, es...)
	}
	return entries
}

func (w *Watcher) recordBatch(ctx context.Context, todo []judged) ([]*entry, error) {
	tx, err := w.cfg.DB.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("record ipc files: %w", err)
	}
	defer tx.Rollback()
	entries := make([]*entry, 0, len(todo))
	for _, j := range todo {
		e, err := w.recordTx(ctx, tx, j.f, j.d)
		if err != nil {
			return nil, fmt.Errorf("record ipc file %s: %w", j.f.ref, err)
		}
		entries = append(entries, e)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("record ipc files: %w", err)
	}
	for _, e := range entries {
		w.open[e.ref] = e
	}
	return entries, nil
}

// recordTx records one file and does its database effect.
func (w *Watcher) recordTx(ctx context.Context, tx *store.Tx, f *file, d decision) (*entry, error) {
	e := &entry{ref: f.ref, hash: f.hash, present: true}
	if !d.accept {
		return e, w.refuseTx(ctx, tx, e, d)
	}
	e.status, e.typ = statusSent, d.req.Type
	if d.req.Type == protocol.TypeSearchHistory {
		e.search = w.searchOf(d.from, d.req)
	}
	if r := d.req; r.Type == protocol.TypeMessage || r.Type == protocol.TypeReaction {
		if err := w.insertTx(ctx, tx, e); err != nil {
			return nil, err
		}
		if r.Type == protocol.TypeReaction {
			return e, w.fx.reactTx(ctx, tx, e.id, f.folder, r.ChatJID, r.MessageID, r.Emoji)
		}
		return e, w.fx.sendMessageTx(ctx, tx, e.id, f.folder, r.ChatJID, r.Text, d.file)
	}
	// A change the database refuses (a finished task, a taken folder)
	// refuses the file: only its own part of the batch is undone.
	if _, err := tx.ExecContext(ctx, `SAVEPOINT ipc_file`); err != nil {
		return nil, err
	}
	err := w.changeTx(ctx, tx, e, d)
	if err != nil && isRefusal(err) {
		if _, rerr := tx.ExecContext(ctx, `ROLLBACK TO ipc_file`); rerr != nil {
			return nil, rerr
		}
		*e = entry{ref: f.ref, hash: f.hash, present: true}
		err = w.refuseTx(ctx, tx, e, refuse(f.ref, err.Error(), "", false))
	}
	if err != nil {
		return nil, err
	}
	_, err = tx.ExecContext(ctx, `RELEASE ipc_file`)
	return e, err
}

// changeTx carries out an accepted file other than a message: a task
// change, a new group, or nothing yet (refresh_groups runs after commit).
func (w *Watcher) changeTx(ctx context.Context, tx *store.Tx, e *entry, d decision) error {
	if err := w.taskTx(ctx, tx, e, d); err != nil {
		return err
	}
	if d.req.Type == protocol.TypeRegisterGroup {
		e.newFolder = d.req.Folder
	}
	if err := w.insertTx(ctx, tx, e); err != nil {
		return err
	}
	if r := d.req; r.Type == protocol.TypeRegisterGroup {
		g := newGroup{JID: r.JID, Name: r.Name, Folder: r.Folder, Trigger: r.Trigger, RequiresTrigger: true, Senders: r.Senders}
		if r.RequiresTrigger != nil {
			g.RequiresTrigger = *r.RequiresTrigger
		}
		return w.fx.registerGroupTx(ctx, tx, e.id, g)
	}
	return nil
}

func (w *Watcher) refuseTx(ctx context.Context, tx *store.Tx, e *entry, d decision) error {
	v := w.violation(e.ref, d)
	e.status, e.reason = statusRefused, v.Detail
	if err := w.insertTx(ctx, tx, e); err != nil {
		return err
	}
	return w.fx.refusedTx(ctx, tx, e.id, v, d.alert)
}

func (w *Watcher) insertTx(ctx context.Context, tx *store.Tx, e *entry) error {
	res, err := tx.ExecContext(ctx, `INSERT INTO ipc_journal (folder, sub, name, hash, status, type, task_id, new_folder, reason, decided_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.folder, e.sub, e.name, e.hash, e.status, e.typ, e.taskID, e.newFolder, e.reason, w.now().UnixMilli())
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	e.id, err = res.LastInsertId()
	return err
}

// isRefusal tells an error that refuses one file (the task or group it
// names does not allow the change) from one of the database.
func isRefusal(err error) bool {
	for _, target := range []error{scheduler.ErrNotFound, scheduler.ErrFinished, scheduler.ErrSchedule,
		groups.ErrDuplicateJID, groups.ErrDuplicateFolder, groups.ErrSecondMain, groups.ErrInvalidFolder} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// taskTx carries out a task request; a new task's id goes into the
// entry, for the verdict the agent is told.
func (w *Watcher) taskTx(ctx context.Context, tx *store.Tx, e *entry, d decision) error {
	r, t := d.req, w.cfg.Tasks
	switch r.Type {
	case protocol.TypeScheduleTask:
		nt := scheduler.NewTask{GroupFolder: d.from.Folder, ChatJID: d.from.JID, Prompt: r.Prompt,
			ScheduleType: r.ScheduleType, ScheduleValue: r.ScheduleValue, ContextMode: r.ContextMode}
		if r.TargetJID != "" && d.to != nil {
			nt.GroupFolder, nt.ChatJID = d.to.Folder, d.to.JID
		}
		task, err := t.Create(ctx, tx, nt)
		e.taskID = task.ID
		return err
	case protocol.TypePauseTask:
		return t.Pause(ctx, tx, r.TaskID)
	case protocol.TypeResumeTask:
		return t.Resume(ctx, tx, r.TaskID)
	case protocol.TypeCancelTask:
		return t.Cancel(ctx, tx, r.TaskID)
	case protocol.TypeUpdateTask:
		u := scheduler.Update{}
		if r.Prompt != "" {
			u.Prompt = &r.Prompt
		}
		if r.ScheduleType != "" {
			u.ScheduleType = &r.ScheduleType
		}
		if r.ScheduleValue != "" {
			u.ScheduleValue = &r.ScheduleValue
		}
		return t.Update(ctx, tx, r.TaskID, u)
	}
	return nil
}

// loadOpen reads the entries whose file effects a crash left undone.
func (w *Watcher) loadOpen(ctx context.Context) error {
	rows, err := w.cfg.DB.QueryContext(ctx, `SELECT id, folder, sub, name, hash, status, type, task_id, new_folder, reason, attempts
		FROM ipc_journal WHERE done = 0 ORDER BY id`)
	if err != nil {
		return fmt.Errorf("ipc watcher: read unfinished files: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		e := &entry{}
		if err := rows.Scan(&e.id, &e.folder, &e.sub, &e.name, &e.hash, &e.status, &e.typ, &e.taskID, &e.newFolder,
			&e.reason, &e.attempts); err != nil {
			return fmt.Errorf("ipc watcher: read unfinished files: %w", err)
		}
		w.open[e.ref] = e
	}
	return rows.Err()
}

// markDone notes that the file effects of the entries ids are done.
func (w *Watcher) markDone(ctx context.Context, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	list, _ := json.Marshal(ids)
	if _, err := w.cfg.DB.ExecContext(ctx, `UPDATE ipc_journal SET done = 1 WHERE id IN (SELECT value FROM json_each(?))`, string(list)); err != nil {
		return fmt.Errorf("journal: mark %d files done: %w", len(ids), err)
	}
	return nil
}

// resume finishes the open entries, such as those a kill -9 interrupted
// after their records committed. Each file still at its path with the
// recorded content is removed or quarantined; a file with other content
// there is a new one, left to the scan.
func (w *Watcher) resume(ctx context.Context) {
	var todo []*entry
	v := w.newView()
	defer v.dirs.close()
	for _, e := range w.open {
		f, err := v.read(ctx, e.ref)
		if err != nil {
			w.logErr(ctx, fmt.Errorf("ipc file %s: %w", e.ref, err))
			continue // unsure whether it is there: not now
		}
		e.present = f != nil && f.hash == e.hash
		if e.present {
			v.reread(ctx, e, f)
		}
		todo = append(todo, e)
	}
	slices.SortFunc(todo, func(a, b *entry) int { return int(a.id - b.id) })
	w.finish(ctx, todo)
}

// prune forgets finished files after a week; their files are long gone.
func (w *Watcher) prune(ctx context.Context) {
	if entries, err := os.ReadDir(w.cfg.Layout.IPCRoot()); err == nil {
		for _, e := range entries {
			if e.IsDir() && e.Name() != layout.ErrorsDir {
				w.pruneVerdicts(ctx, e.Name())
			}
		}
	}
	cutoff := w.now().Add(-7 * 24 * time.Hour).UnixMilli()
	if _, err := w.cfg.DB.ExecContext(ctx, `DELETE FROM ipc_journal WHERE done = 1 AND decided_at < ?`, cutoff); err != nil && ctx.Err() == nil {
		w.cfg.Log.Warn().Err(err).Msg("ipc watcher: prune")
	}
}
