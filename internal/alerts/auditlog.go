package alerts

// The audit log: each violation is a line in its group's security.jsonl,
// written after its row commits and marked in the row, so a crash between
// the two is repaired at the next start without a second line.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// logLine appends v to its group's security.jsonl (fsync'd) and marks the
// row written.
func (r *Reporter) logLine(ctx context.Context, id int64, v security.Violation, replay bool) error {
	return r.logLines(ctx, []auditRow{{id, v}}, replay)
}

// auditRow is a violation's row id and what it says.
type auditRow struct {
	id int64
	v  security.Violation
}

// logLines appends the lines of rows, all of one group, to its
// security.jsonl in one write and one fsync, and marks the rows written in
// one statement: a flood of refused files writes its audit per batch, not
// per file. The check of the marks under fileMu keeps Run's replay and a
// concurrent Report from writing one row twice.
func (r *Reporter) logLines(ctx context.Context, rows []auditRow, replay bool) error {
	var links found
	err := r.logLinesLocked(ctx, rows, replay, &links)
	// A link found on the way is reported once the lock is free: its own
	// audit line then goes into the real logs/ that replaced the link.
	for _, lv := range links {
		if rerr := r.Report(ctx, lv); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// found keeps the links groupfs met while fileMu was held.
type found []security.Violation

func (f *found) Report(_ context.Context, v security.Violation) error {
	*f = append(*f, v)
	return nil
}

func (r *Reporter) logLinesLocked(ctx context.Context, rows []auditRow, replay bool, links *found) error {
	r.fileMu.Lock()
	defer r.fileMu.Unlock()
	ids := make([]int64, len(rows))
	for i, x := range rows {
		ids[i] = x.id
	}
	list, _ := json.Marshal(ids)
	q, err := r.db.QueryContext(ctx, `SELECT id FROM violations WHERE logged = 0 AND id IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return fmt.Errorf("alerts: read violations: %w", err)
	}
	open := map[int64]bool{}
	for q.Next() {
		var id int64
		if err := q.Scan(&id); err != nil {
			q.Close()
			return fmt.Errorf("alerts: read violations: %w", err)
		}
		open[id] = true
	}
	q.Close()
	if err := q.Err(); err != nil {
		return fmt.Errorf("alerts: read violations: %w", err)
	}
	var todo []security.Violation
	ids = ids[:0]
	for _, x := range rows {
		if open[x.id] {
			todo, ids = append(todo, x.v), append(ids, x.id)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	list, _ = json.Marshal(ids)
	mark := func() error {
		_, err := r.db.ExecContext(context.WithoutCancel(ctx), `UPDATE violations SET logged = 1 WHERE id IN (SELECT value FROM json_each(?))`, string(list))
		return err
	}
	if err := r.appendLines(ctx, todo, replay, links); err != nil {
		if errors.Is(err, errBadFolder) {
			// Nothing will ever fix it; the SQLite row is the record.
			mark()
		}
		return err
	}
	if err := mark(); err != nil {
		return fmt.Errorf("alerts: mark %d violations logged: %w", len(ids), err)
	}
	return nil
}

var errBadFolder = errors.New("not a valid group folder name")

// The audit log rotates once it would grow past auditMax, keeping
// auditKeep old files (security.jsonl.1 the newest): a flood must not fill
// the group's folder with its own audit trail, and the database keeps
// every row whatever the files dropped.
const (
	auditMax  = 10 << 20
	auditKeep = 5
)

// appendLines appends the lines of vs, all of one group, to its
// logs/security.jsonl. The group's folder is the group's to write, so the
// file is reached through groupfs: a link at logs/ or security.jsonl is
// removed (and kept in links for the caller to report), never written
// through; rotation renames inside that directory, never following a link.
func (r *Reporter) appendLines(ctx context.Context, vs []security.Violation, replay bool, links *found) error {
	group := vs[0].Group
	if groups.ValidFolder(group) != nil {
		return fmt.Errorf("alerts: audit line for %q: %w", group, errBadFolder)
	}
	l := layout.New("", r.groupsDir)
	dir, err := groupfs.OpenSub(ctx, l.GroupLogs(group), group, 0o700, links)
	if err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	defer dir.Close()
	path := l.SecurityLog(group)
	name := filepath.Base(path)
	f, err := dir.OpenFile(ctx, name, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("alerts: open audit log: %w", err)
	}
	var tail []byte
	if replay {
		tail = readTail(f)
	}
	var buf []byte
	for _, v := range vs {
		line, err := json.Marshal(v)
		if err != nil {
			f.Close()
			return fmt.Errorf("alerts: encode violation: %w", err)
		}
		line = append(line, '\n')
		if replay && bytes.Contains(tail, line) {
			// Written before a crash that came before the row was marked:
			// the line (its time has nanoseconds) is there already.
			continue
		}
		buf = append(buf, line...)
	}
	if len(buf) == 0 {
		return f.Close()
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 && fi.Size()+int64(len(buf)) > auditMax {
		f.Close()
		if err := rotate(dir, name); err != nil {
			return fmt.Errorf("alerts: rotate %s: %w", path, err)
		}
		if f, err = dir.OpenFile(ctx, name, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600); err != nil {
			return fmt.Errorf("alerts: open audit log: %w", err)
		}
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("alerts: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("alerts: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("alerts: close %s: %w", path, err)
	}
	return nil
}

// rotate shifts name.1 … name.(auditKeep-1) up by one (the oldest is
// replaced) and name to name.1, inside dir.
func rotate(dir *groupfs.Dir, name string) error {
	root := dir.Root()
	for i := auditKeep - 1; i >= 1; i-- {
		err := root.Rename(fmt.Sprintf("%s.%d", name, i), fmt.Sprintf("%s.%d", name, i+1))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return root.Rename(name, name+".1")
}

// auditTail is how much of an audit log's end replay looks at for a line
// already written; a crash leaves at most the lines in flight unmarked.
const auditTail = 256 << 10

// readTail is the last auditTail bytes of f.
func readTail(f *os.File) []byte {
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(fi.Size()-auditTail, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil
	}
	return buf
}

// replayLog writes the audit lines of rows a crash left unwritten.
func (r *Reporter) replayLog(ctx context.Context) error {
	rows, err := r.db.QueryContext(ctx,
		`SELECT id, time, grp, kind, tool, target, detail, action, rule FROM violations WHERE logged = 0 ORDER BY id`)
	if err != nil {
		return fmt.Errorf("alerts: read unwritten audit rows: %w", err)
	}
	var todo []auditRow
	for rows.Next() {
		var (
			x  auditRow
			ns int64
		)
		if err := rows.Scan(&x.id, &ns, &x.v.Group, &x.v.Kind, &x.v.Tool, &x.v.Target, &x.v.Detail, &x.v.Action, &x.v.Rule); err != nil {
			rows.Close()
			return fmt.Errorf("alerts: read unwritten audit rows: %w", err)
		}
		x.v.Time = time.Unix(0, ns).UTC()
		todo = append(todo, x)
	}
	rows.Close()
	// One write per group, each group's lines in their order.
	byGroup := map[string][]auditRow{}
	var order []string
	for _, x := range todo {
		if byGroup[x.v.Group] == nil {
			order = append(order, x.v.Group)
		}
		byGroup[x.v.Group] = append(byGroup[x.v.Group], x)
	}
	var errs []error
	for _, g := range order {
		if err := r.logLines(ctx, byGroup[g], true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
