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
	"os"
	"path/filepath"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// logLine appends v to its group's security.jsonl (fsync'd) and marks the
// row written. The check of the mark under fileMu keeps Run's replay and a
// concurrent Report from writing one row twice.
func (r *Reporter) logLine(ctx context.Context, id int64, v security.Violation, replay bool) error {
	var links found
	err := r.logLineLocked(ctx, id, v, replay, &links)
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

func (r *Reporter) logLineLocked(ctx context.Context, id int64, v security.Violation, replay bool, links *found) error {
	r.fileMu.Lock()
	defer r.fileMu.Unlock()
	var logged int
	if err := r.db.QueryRowContext(ctx, `SELECT logged FROM violations WHERE id = ?`, id).Scan(&logged); err != nil {
		return fmt.Errorf("alerts: read violation %d: %w", id, err)
	}
	if logged != 0 {
		return nil
	}
	if err := r.appendLine(ctx, v, replay, links); err != nil {
		if errors.Is(err, errBadFolder) {
			// Nothing will ever fix it; the SQLite row is the record.
			r.db.ExecContext(ctx, `UPDATE violations SET logged = 1 WHERE id = ?`, id)
		}
		return err
	}
	if _, err := r.db.ExecContext(context.WithoutCancel(ctx), `UPDATE violations SET logged = 1 WHERE id = ?`, id); err != nil {
		return fmt.Errorf("alerts: mark violation %d logged: %w", id, err)
	}
	return nil
}

var errBadFolder = errors.New("not a valid group folder name")

// appendLine appends v's line to its group's logs/security.jsonl. The
// group's folder is the group's to write, so the file is reached through
// groupfs: a link at logs/ or security.jsonl is removed (and kept in links
// for the caller to report), never written through.
func (r *Reporter) appendLine(ctx context.Context, v security.Violation, replay bool, links *found) error {
	if groups.ValidFolder(v.Group) != nil {
		return fmt.Errorf("alerts: audit line for %q: %w", v.Group, errBadFolder)
	}
	l := layout.New("", r.groupsDir)
	dir, err := groupfs.OpenSub(ctx, l.GroupLogs(v.Group), v.Group, 0o700, links)
	if err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	defer dir.Close()
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("alerts: encode violation: %w", err)
	}
	path := l.SecurityLog(v.Group)
	f, err := dir.OpenFile(ctx, filepath.Base(path), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("alerts: open audit log: %w", err)
	}
	line = append(line, '\n')
	if replay && endsWith(f, line) {
		// Written before a crash that came before the row was marked: the
		// line (its time has nanoseconds) is there already.
		return f.Close()
	}
	if _, err := f.Write(line); err != nil {
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

// auditTail is how much of an audit log's end replay looks at for a line
// already written; a crash leaves at most the lines in flight unmarked.
const auditTail = 256 << 10

// endsWith tells whether line is among the last auditTail bytes of f.
func endsWith(f *os.File, line []byte) bool {
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	off := max(fi.Size()-auditTail, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return false
	}
	return bytes.Contains(buf, line)
}

// replayLog writes the audit lines of rows a crash left unwritten.
func (r *Reporter) replayLog(ctx context.Context) error {
	rows, err := r.db.QueryContext(ctx,
		`SELECT id, time, grp, kind, tool, target, detail, action, rule FROM violations WHERE logged = 0 ORDER BY id`)
	if err != nil {
		return fmt.Errorf("alerts: read unwritten audit rows: %w", err)
	}
	type row struct {
		id int64
		v  security.Violation
	}
	var todo []row
	for rows.Next() {
		var (
			x  row
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
	var errs []error
	for _, x := range todo {
		if err := r.logLine(ctx, x.id, x.v, true); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
