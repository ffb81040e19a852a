package ipc

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// Groups looks up registered groups (the daemon adapts its registry).
type Groups interface {
	GroupByFolder(ctx context.Context, folder string) (g Group, ok bool, err error)
	GroupByJID(ctx context.Context, jid string) (g Group, ok bool, err error)
}

// TokenChecker is the part of *Tokens the watcher uses.
type TokenChecker interface {
	Check(ctx context.Context, folder, token string) (ok bool, owner string, err error)
}

// Tasks is the part of *scheduler.Scheduler the watcher uses. Task changes
// run inside the transaction that records the file.
type Tasks interface {
	Create(ctx context.Context, q scheduler.Querier, nt scheduler.NewTask) (scheduler.Task, error)
	Get(ctx context.Context, q scheduler.Querier, id string) (scheduler.Task, error)
	Pause(ctx context.Context, q scheduler.Querier, id string) error
	Resume(ctx context.Context, q scheduler.Querier, id string) error
	Cancel(ctx context.Context, q scheduler.Querier, id string) error
	Update(ctx context.Context, q scheduler.Querier, id string, u scheduler.Update) error
	Changed()
}

// NewGroup is what register_group asks for.
type NewGroup struct {
	JID, Name, Folder string
	Trigger           string   // "" = the default trigger (@assistantName)
	RequiresTrigger   bool     // true unless the file says false
	Senders           []string // who may call its assistant; nil = everyone
}

// Actions are the side effects of accepted files, and the reporting of
// refused ones; the daemon implements them. key is stable for one file
// across crashes and restarts: a call may be repeated with the same key
// after a kill -9, and the implementation must then do nothing new (the
// outbox uses key as the message id; alerts use it to drop a repeat).
type Actions interface {
	// SendMessage queues text for chatJID; file, when not nil, is the
	// daemon's copy of the file it carries, which SendMessage now owns.
	SendMessage(ctx context.Context, key, fromFolder, chatJID, text string, file *channel.Attachment) error
	// RegisterGroup registers g, creating its folder; registering the same
	// jid and folder again must succeed. The watcher then watches it.
	RegisterGroup(ctx context.Context, key string, g NewGroup) error
	RefreshGroups(ctx context.Context) error
	// Violation audits a refused file; alert says it also goes to the
	// main group (wrong token or cross-group attempt).
	Violation(ctx context.Context, key string, v security.Violation, alert bool) error
}

// Config holds what a Watcher works with.
type Config struct {
	IPCRoot string // <dataDir>/ipc
	// Layout names the groups' folders (a message's file must lie in its
	// group's) and where the daemon copies such a file.
	Layout  layout.Layout
	DB      *sql.DB
	Tokens  TokenChecker
	Groups  Groups
	Tasks   Tasks
	Actions Actions
	Log     zerolog.Logger
	// SafetyRescan is the period of a full rescan that catches anything
	// fsnotify missed; default one minute.
	SafetyRescan time.Duration
}

// maxAttempts bounds retries of an action that keeps failing.
const maxAttempts = 5

// Watcher carries out the IPC files of every watched group, one at a time.
type Watcher struct {
	cfg Config
	fsw *fsnotify.Watcher
	now func() time.Time

	// unmarked is the one record (0: none) whose side effect is done but
	// which is not yet marked done in SQLite. Its mark rides in the next
	// record's transaction, which saves a write per file in a burst; it is
	// written on its own when the watcher falls idle, before anything else
	// is finished, and before a rescan. So a kill -9 leaves at most one
	// finished file unmarked, as before, and the restart repeats its side
	// effect under the same key, which Actions drop. Only Run's goroutine
	// touches it.
	unmarked int64

	mu      sync.Mutex
	folders map[string]bool // watched
	pending map[string]bool // to scan
	kick    chan struct{}
}

// NewWatcher prepares <IPCRoot>/errors and an fsnotify watcher. Call Watch
// for each registered group (before or after Run) and Run to start.
func NewWatcher(cfg Config) (*Watcher, error) {
	if cfg.SafetyRescan <= 0 {
		cfg.SafetyRescan = time.Minute
	}
	if err := mkdirPrivate(filepath.Join(cfg.IPCRoot, ErrorsDir)); err != nil {
		return nil, err
	}
	fsw, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, fmt.Errorf("ipc watcher: %w", err)
	}
	return &Watcher{cfg: cfg, fsw: fsw, now: time.Now, folders: map[string]bool{},
		pending: map[string]bool{}, kick: make(chan struct{}, 1)}, nil
}

func mkdirPrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return nil
}

// Watch creates folder's messages/ and tasks/ (mode 0700), watches them and
// handles the files already there. It takes effect at once.
func (w *Watcher) Watch(folder string) error {
	if err := groups.ValidFolder(folder); err != nil {
		return fmt.Errorf("watch ipc: %w", err)
	}
	if err := w.ensureWatched(folder); err != nil {
		return err
	}
	w.mu.Lock()
	w.folders[folder] = true
	w.pending[folder] = true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return nil
}

func (w *Watcher) ensureWatched(folder string) error {
	for _, sub := range []string{"", MessagesDir, TasksDir} {
		dir := filepath.Join(w.cfg.IPCRoot, folder, sub)
		if err := mkdirPrivate(dir); err != nil {
			return err
		}
		if sub == "" {
			continue
		}
		if err := w.fsw.Add(dir); err != nil {
			return fmt.Errorf("watch %s: %w", dir, err)
		}
	}
	return nil
}

// Unwatch stops watching folder (its group was removed); its files stay.
func (w *Watcher) Unwatch(folder string) {
	w.mu.Lock()
	delete(w.folders, folder)
	w.mu.Unlock()
	for _, sub := range []string{MessagesDir, TasksDir} {
		_ = w.fsw.Remove(filepath.Join(w.cfg.IPCRoot, folder, sub))
	}
}

// Run handles files until ctx ends: those present at start, those recorded
// but unfinished before a crash, then each file as it appears.
func (w *Watcher) Run(ctx context.Context) error {
	defer w.fsw.Close()
	// Stopping is not a crash: leave no finished file to be repeated.
	defer func() { w.logErr(ctx, w.markDone(context.WithoutCancel(ctx))) }()
	w.scanPending(ctx)
	w.resume(ctx)
	tick := time.NewTicker(w.cfg.SafetyRescan)
	defer tick.Stop()
	for {
		if len(w.fsw.Events) == 0 {
			// Idle: no later record will carry the mark soon.
			w.logErr(ctx, w.markDone(ctx))
		}
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return errors.New("ipc watcher: fsnotify closed")
			}
			if ev.Has(fsnotify.Create) || ev.Has(fsnotify.Write) {
				w.event(ctx, ev.Name)
			}
		case err, ok := <-w.fsw.Errors:
			if !ok {
				return errors.New("ipc watcher: fsnotify closed")
			}
			// Dropped events never come back: look at everything again.
			w.cfg.Log.Warn().Err(err).Msg("ipc watcher: rescanning")
			w.scanAll(ctx)
		case <-w.kick:
			w.scanPending(ctx)
		case <-tick.C:
			w.scanAll(ctx)
			w.resume(ctx)
			w.prune(ctx)
		}
	}
}

func (w *Watcher) event(ctx context.Context, path string) {
	rel, err := filepath.Rel(w.cfg.IPCRoot, path)
	if err != nil {
		return
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if len(parts) != 3 || (parts[1] != MessagesDir && parts[1] != TasksDir) || !strings.HasSuffix(parts[2], ".json") {
		return
	}
	w.mu.Lock()
	watched := w.folders[parts[0]]
	w.mu.Unlock()
	if watched {
		w.handle(ctx, parts[0], parts[1], parts[2])
	}
}

func (w *Watcher) scanPending(ctx context.Context) {
	w.mu.Lock()
	folders := w.pending
	w.pending = map[string]bool{}
	w.mu.Unlock()
	for f := range folders {
		w.scanFolder(ctx, f)
	}
}

func (w *Watcher) scanAll(ctx context.Context) {
	w.mu.Lock()
	var folders []string
	for f := range w.folders {
		folders = append(folders, f)
	}
	w.mu.Unlock()
	for _, f := range folders {
		// A deleted directory loses its watch; bring both back.
		if err := w.ensureWatched(f); err != nil {
			w.cfg.Log.Error().Err(err).Str("group", f).Msg("ipc watcher")
		}
		w.scanFolder(ctx, f)
	}
}

func (w *Watcher) scanFolder(ctx context.Context, folder string) {
	for _, sub := range []string{MessagesDir, TasksDir} {
		entries, err := os.ReadDir(filepath.Join(w.cfg.IPCRoot, folder, sub))
		if err != nil {
			w.cfg.Log.Error().Err(err).Str("group", folder).Msg("ipc watcher: scan")
			continue
		}
		for _, e := range entries { // in name order: NanoClaw names start with the time
			if ctx.Err() != nil {
				return
			}
			if strings.HasSuffix(e.Name(), ".json") {
				w.handle(ctx, folder, sub, e.Name())
			}
		}
	}
}

func (w *Watcher) handle(ctx context.Context, folder, sub, name string) {
	if err := w.handleFile(ctx, folder, sub, name); err != nil && ctx.Err() == nil {
		// The file stays where it is and is tried again on the next rescan.
		w.cfg.Log.Error().Err(err).Str("group", folder).Str("file", sub+"/"+name).Msg("ipc watcher")
	}
}

// record is one row of ipc_files.
type record struct {
	id                int64
	folder, sub, name string
	state             string
	req               Request
	file              *channel.Attachment // a message's file: the daemon's copy
	v                 security.Violation
	alert             bool
	attempts          int
	decidedAt         int64 // unix ms
}

// key names the record's side effect for Actions. The row id alone is not
// enough: SQLite hands out the ids of pruned rows again (after a quiet
// week prune empties the table and ids restart at 1), and the daemon keeps
// the keys it has done, so a new file would be taken for an old one and
// dropped. decided_at only grows for a given id.
func (r *record) key() string { return fmt.Sprintf("ipc-%d-%d", r.id, r.decidedAt) }

func (w *Watcher) handleFile(ctx context.Context, folder, sub, name string) error {
	if err := w.checkDirs(folder, sub); err != nil {
		return err
	}
	path := filepath.Join(w.cfg.IPCRoot, folder, sub, name)
	data, hash, bad, err := readIPCFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // already handled
	}
	if err != nil {
		return err
	}
	rec, found, err := w.lookup(ctx, folder, sub, name, hash)
	if err != nil {
		return err
	}
	// A finished record's file was removed or quarantined before the record
	// was marked finished, so a file found under it now is a new one with
	// the same name and content: it is decided again.
	if !found || rec.state == "done" || rec.state == "failed" {
		d, err := w.decide(ctx, folder, sub, name, data, bad)
		if err != nil {
			return err
		}
		if rec, err = w.record(ctx, folder, sub, name, hash, d); err != nil {
			return err
		}
	}
	return w.finish(ctx, rec, path)
}

// checkDirs refuses to read through a group directory an agent replaced
// with a symlink (say, to another group's messages/).
func (w *Watcher) checkDirs(folder, sub string) error {
	for _, dir := range []string{filepath.Join(w.cfg.IPCRoot, folder), filepath.Join(w.cfg.IPCRoot, folder, sub)} {
		fi, err := os.Lstat(dir)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory (%s); remove it, the watcher recreates it", dir, fi.Mode().Type())
		}
	}
	return nil
}

// readIPCFile reads path without following a symlink or blocking on a
// FIFO. bad is set, and nothing read, for anything but a regular file of at
// most MaxFileSize; hash then identifies that object instead of content.
func readIPCFile(path string) (data []byte, hash, bad string, err error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, "", "", err
	}
	ident := func() string {
		id := fmt.Sprintf("%s:%d:%d", fi.Mode().Type(), fi.Size(), fi.ModTime().UnixNano())
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			id += fmt.Sprintf(":%d", st.Ino)
		}
		return "nonregular:" + id
	}
	if !fi.Mode().IsRegular() {
		return nil, ident(), fmt.Sprintf("not a regular file (%s); write files with the nanoclaw MCP tools", kind(fi.Mode())), nil
	}
	if fi.Size() > MaxFileSize {
		return nil, ident(), fmt.Sprintf("file of %d bytes is over the 1 MiB limit", fi.Size()), nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENXIO) {
			return nil, ident(), "replaced while being read", nil
		}
		return nil, "", "", err
	}
	defer f.Close()
	if ofi, err := f.Stat(); err != nil || !os.SameFile(fi, ofi) {
		return nil, ident(), "replaced while being read", nil
	}
	data, err = io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, "", "", fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, ident(), "file grew over the 1 MiB limit while being read", nil
	}
	sum := sha256.Sum256(data)
	return data, hex.EncodeToString(sum[:]), "", nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return m.Type().String()
}

// decision is the verdict on one file before anything is done about it.
type decision struct {
	accept bool
	req    Request
	from   Group
	reason string
	alert  bool
	group  string // who tried: the directory's group, or the token's owner
	target string
	kind   security.Kind       // of a refusal; "" = security.KindIPC
	file   *channel.Attachment // an accepted message's file: the daemon's copy
}

func (w *Watcher) decide(ctx context.Context, folder, sub, name string, data []byte, bad string) (decision, error) {
	refuse := func(reason, target string, alert bool) (decision, error) {
		return decision{reason: reason, target: target, alert: alert, group: folder}, nil
	}
	if bad != "" {
		return refuse(bad, "", false)
	}
	from, ok, err := w.cfg.Groups.GroupByFolder(ctx, folder)
	if err != nil {
		return decision{}, err
	}
	if !ok {
		return refuse(fmt.Sprintf("ipc/%s is not a registered group's directory", folder), "", false)
	}
	req, derr := Decode(data)
	switch {
	case errors.Is(derr, ErrSyntax):
		return refuse("bad JSON: "+derr.Error(), "", false)
	case errors.Is(derr, ErrNoToken):
		return refuse(derr.Error(), "ipc/"+folder, true)
	}
	ok, owner, err := w.cfg.Tokens.Check(ctx, folder, req.Token)
	if err != nil {
		return decision{}, err
	}
	if !ok {
		if owner != "" {
			d, _ := refuse(fmt.Sprintf("token of a run of group %s, found in ipc/%s: %s tried to act as %s", owner, folder, owner, folder), "ipc/"+folder, true)
			d.group = owner
			return d, nil
		}
		return refuse("wrong or expired token", "ipc/"+folder, true)
	}
	if derr != nil {
		return refuse(derr.Error(), "", false)
	}
	if Dir(req.Type) != sub {
		return refuse(fmt.Sprintf("type %s belongs in %s/, not %s/", req.Type, Dir(req.Type), sub), "", false)
	}
	facts, err := w.facts(ctx, req)
	if err != nil {
		return decision{}, err
	}
	if r := Authorize(from, req, facts); r != nil {
		return refuse(r.Reason, r.Target, r.Alert)
	}
	d := decision{accept: true, req: req, from: from, group: folder}
	if req.File != "" {
		// The sender's own folder, main's included: what a group may send
		// is what it may read.
		file, r, err := stageFile(w.cfg.Layout.Group(folder), req.File, w.cfg.Layout.Outgoing())
		if err != nil {
			return decision{}, err
		}
		if r != nil {
			d, _ := refuse(r.Reason, r.Target, r.Alert)
			d.kind = r.Kind
			return d, nil
		}
		d.file = &file
	}
	return d, nil
}

func (w *Watcher) facts(ctx context.Context, req Request) (Facts, error) {
	var f Facts
	jid := req.ChatJID
	if req.Type == TypeScheduleTask {
		jid = req.TargetJID
	}
	if jid != "" && (req.Type == TypeMessage || req.Type == TypeScheduleTask) {
		g, ok, err := w.cfg.Groups.GroupByJID(ctx, jid)
		if err != nil {
			return f, err
		}
		if ok {
			f.Target = &g
		}
	}
	if req.TaskID != "" {
		t, err := w.cfg.Tasks.Get(ctx, w.cfg.DB, req.TaskID)
		if err != nil && !errors.Is(err, scheduler.ErrNotFound) {
			return f, err
		}
		f.TaskFolder = t.GroupFolder
	}
	if req.Type == TypeRegisterGroup {
		g, ok, err := w.cfg.Groups.GroupByFolder(ctx, req.Folder)
		if err != nil {
			return f, err
		}
		if ok {
			f.FolderOwner = g.JID
		}
	}
	return f, nil
}

// record stores the decision, and carries out task changes, in one
// transaction: after it commits the file's fate is fixed.
func (w *Watcher) record(ctx context.Context, folder, sub, name, hash string, d decision) (*record, error) {
	rec := &record{folder: folder, sub: sub, name: name}
	for {
		tx, err := w.cfg.DB.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("record ipc file: %w", err)
		}
		if d.accept {
			if err := w.applyTask(ctx, tx, &d); err != nil {
				tx.Rollback()
				if !isTaskRefusal(err) {
					return nil, err
				}
				d = decision{reason: err.Error(), group: folder}
				continue
			}
		}
		if w.unmarked != 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE ipc_files SET state = 'done' WHERE id = ?`, w.unmarked); err != nil {
				tx.Rollback()
				return nil, fmt.Errorf("record ipc file done: %w", err)
			}
		}
		rec.state, rec.req, rec.file, rec.alert = "refused", d.req, d.file, d.alert
		var reqJSON, vJSON sql.NullString
		if d.accept {
			rec.state = "accepted"
			b, _ := json.Marshal(recorded{d.req, d.file})
			reqJSON = sql.NullString{String: string(b), Valid: true}
		} else {
			target := d.target
			if target == "" {
				target = fmt.Sprintf("ipc/%s/%s/%s", folder, sub, name)
			}
			kind := d.kind
			if kind == "" {
				kind = security.KindIPC
			}
			rec.v = security.Violation{Time: w.now().UTC(), Group: d.group, Kind: kind, Tool: "ipc", Target: target,
				Detail: fmt.Sprintf("%s (file ipc/%s/%s/%s)", d.reason, folder, sub, name), Action: "blocked"}
			b, _ := json.Marshal(rec.v)
			vJSON = sql.NullString{String: string(b), Valid: true}
		}
		// A new file with a finished record's name and content takes over
		// its row, with a later decided_at and so a new key.
		err = tx.QueryRowContext(ctx, `INSERT INTO ipc_files (folder, sub, name, hash, state, request, violation, alert, decided_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (folder, sub, name, hash) DO UPDATE SET state = excluded.state, request = excluded.request,
				violation = excluded.violation, alert = excluded.alert, attempts = 0,
				decided_at = max(excluded.decided_at, ipc_files.decided_at + 1)
			RETURNING id, decided_at`,
			folder, sub, name, hash, rec.state, reqJSON, vJSON, rec.alert, w.now().UnixMilli()).Scan(&rec.id, &rec.decidedAt)
		if err != nil {
			tx.Rollback()
			return nil, fmt.Errorf("record ipc file: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("record ipc file: %w", err)
		}
		w.unmarked = 0
		return rec, nil
	}
}

func isTaskRefusal(err error) bool {
	return errors.Is(err, scheduler.ErrNotFound) || errors.Is(err, scheduler.ErrFinished) || errors.Is(err, scheduler.ErrSchedule)
}

// applyTask carries out a task request inside the record transaction; a
// new task's id is kept in the recorded request (its TaskID), for the
// verdict the agent is told.
func (w *Watcher) applyTask(ctx context.Context, tx *sql.Tx, d *decision) error {
	r, t := d.req, w.cfg.Tasks
	switch r.Type {
	case TypeScheduleTask:
		nt := scheduler.NewTask{GroupFolder: d.from.Folder, ChatJID: d.from.JID, Prompt: r.Prompt,
			ScheduleType: r.ScheduleType, ScheduleValue: r.ScheduleValue, ContextMode: r.ContextMode}
		if r.TargetJID != "" {
			g, _, err := w.cfg.Groups.GroupByJID(ctx, r.TargetJID)
			if err != nil {
				return err
			}
			nt.GroupFolder, nt.ChatJID = g.Folder, g.JID
		}
		task, err := t.Create(ctx, tx, nt)
		d.req.TaskID = task.ID
		return err
	case TypePauseTask:
		return t.Pause(ctx, tx, r.TaskID)
	case TypeResumeTask:
		return t.Resume(ctx, tx, r.TaskID)
	case TypeCancelTask:
		return t.Cancel(ctx, tx, r.TaskID)
	case TypeUpdateTask:
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

func (w *Watcher) lookup(ctx context.Context, folder, sub, name, hash string) (*record, bool, error) {
	row := w.cfg.DB.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM ipc_files
		WHERE folder = ? AND sub = ? AND name = ? AND hash = ?`, folder, sub, name, hash)
	rec, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err == nil && rec.id == w.unmarked {
		rec.state = "done" // finished, only its mark is pending
	}
	return rec, err == nil, err
}

// recorded is what ipc_files.request holds of an accepted file: the
// request, and the daemon's copy of a message's file.
type recorded struct {
	Request
	Staged *channel.Attachment `json:"staged,omitempty"`
}

const recordColumns = `id, folder, sub, name, state, COALESCE(request, ''), COALESCE(violation, ''), alert, attempts, decided_at`

func scanRecord(row interface{ Scan(...any) error }) (*record, error) {
	var r record
	var req, v string
	if err := row.Scan(&r.id, &r.folder, &r.sub, &r.name, &r.state, &req, &v, &r.alert, &r.attempts, &r.decidedAt); err != nil {
		return nil, err
	}
	if req != "" {
		var rq recorded
		if err := json.Unmarshal([]byte(req), &rq); err != nil {
			return nil, fmt.Errorf("ipc record %d: %w", r.id, err)
		}
		r.req, r.file = rq.Request, rq.Staged
	}
	if v != "" {
		if err := json.Unmarshal([]byte(v), &r.v); err != nil {
			return nil, fmt.Errorf("ipc record %d: %w", r.id, err)
		}
	}
	return &r, nil
}

// finish carries out what rec decided and removes (or quarantines) the
// file at path; path is "" when the file is gone. It is safe to repeat.
func (w *Watcher) finish(ctx context.Context, rec *record, path string) error {
	if rec.state == "accepted" || rec.state == "refused" {
		// At most one finished record is ever left unmarked: an earlier
		// one not carried by a record transaction (resume finishes without
		// recording) is marked before this one's side effect.
		if err := w.markDone(ctx); err != nil {
			return err
		}
	}
	switch rec.state {
	case "accepted":
		if err := w.act(ctx, rec); err != nil {
			return w.failed(ctx, rec, path, err)
		}
		if path != "" {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		v := Verdict{Status: "sent"}
		if rec.req.Type == TypeScheduleTask {
			v.ID = rec.req.TaskID
		}
		w.logErr(ctx, w.writeVerdict(rec.folder, rec.name, v))
	case "refused":
		if path != "" {
			if err := w.quarantine(rec, path, rec.v.Detail); err != nil {
				return err
			}
		}
		if err := w.cfg.Actions.Violation(ctx, rec.key(), rec.v, rec.alert); err != nil {
			return w.failed(ctx, rec, "", err)
		}
		w.logErr(ctx, w.writeVerdict(rec.folder, rec.name, Verdict{Status: "refused", Reason: refusalReason(rec.v.Detail)}))
	default: // done or failed: nothing is left to do (handleFile decides a new file again)
		return nil
	}
	w.unmarked = rec.id
	return nil
}

func (w *Watcher) logErr(ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil {
		w.cfg.Log.Error().Err(err).Msg("ipc watcher")
	}
}

// markDone writes the pending done-mark, if any.
func (w *Watcher) markDone(ctx context.Context) error {
	if w.unmarked == 0 {
		return nil
	}
	if _, err := w.cfg.DB.ExecContext(ctx, `UPDATE ipc_files SET state = 'done' WHERE id = ?`, w.unmarked); err != nil {
		return fmt.Errorf("record ipc file done: %w", err)
	}
	w.unmarked = 0
	return nil
}

func (w *Watcher) act(ctx context.Context, rec *record) error {
	r, a := rec.req, w.cfg.Actions
	switch r.Type {
	case TypeMessage:
		return a.SendMessage(ctx, rec.key(), rec.folder, r.ChatJID, r.Text, rec.file)
	case TypeRegisterGroup:
		g := NewGroup{JID: r.JID, Name: r.Name, Folder: r.Folder, Trigger: r.Trigger, RequiresTrigger: true, Senders: r.Senders}
		if r.RequiresTrigger != nil {
			g.RequiresTrigger = *r.RequiresTrigger
		}
		if err := a.RegisterGroup(ctx, rec.key(), g); err != nil {
			return err
		}
		return w.Watch(r.Folder)
	case TypeRefreshGroups:
		return a.RefreshGroups(ctx)
	default:
		w.cfg.Tasks.Changed() // the change itself committed with the record
		return nil
	}
}

// failed counts a failed attempt; after maxAttempts the file is given up
// and quarantined with the last error.
func (w *Watcher) failed(ctx context.Context, rec *record, path string, cause error) error {
	rec.attempts++
	state := rec.state
	if rec.attempts >= maxAttempts {
		state = "failed"
	}
	if _, err := w.cfg.DB.ExecContext(ctx, `UPDATE ipc_files SET attempts = ?, state = ? WHERE id = ?`, rec.attempts, state, rec.id); err != nil {
		return errors.Join(cause, err)
	}
	if state == "failed" {
		reason := fmt.Sprintf("gave up after %d attempts: %v", rec.attempts, cause)
		if path != "" {
			_ = w.quarantine(rec, path, reason)
		}
		w.logErr(ctx, w.writeVerdict(rec.folder, rec.name, Verdict{Status: "refused", Reason: reason}))
	}
	return fmt.Errorf("ipc file %s/%s/%s (attempt %d of %d): %w", rec.folder, rec.sub, rec.name, rec.attempts, maxAttempts, cause)
}

// quarantine moves the file (whatever it is: a symlink or FIFO is moved,
// not followed or opened) to ipc/errors/ with the reason beside it.
// Repeating it after a crash only rewrites the reason.
func (w *Watcher) quarantine(rec *record, path, reason string) error {
	dest := filepath.Join(w.cfg.IPCRoot, ErrorsDir, fmt.Sprintf("%s.%s.%d.%s", rec.folder, rec.sub, rec.id, rec.name))
	if err := os.Rename(path, dest); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("quarantine %s: %w", path, err)
	}
	if err := os.WriteFile(dest+".reason", []byte(reason+"\n"), 0o600); err != nil {
		return fmt.Errorf("quarantine %s: %w", path, err)
	}
	return nil
}

// resume finishes every decision recorded but not carried out, such as
// those a kill -9 interrupted and whose file is already gone.
func (w *Watcher) resume(ctx context.Context) {
	// The unmarked record is finished: it must not be read back as unfinished.
	if err := w.markDone(ctx); err != nil {
		w.logErr(ctx, err)
		return
	}
	rows, err := w.cfg.DB.QueryContext(ctx, `SELECT `+recordColumns+` FROM ipc_files WHERE state IN ('accepted', 'refused') ORDER BY id`)
	if err != nil {
		if ctx.Err() == nil {
			w.cfg.Log.Error().Err(err).Msg("ipc watcher: read unfinished files")
		}
		return
	}
	var recs []*record
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			w.cfg.Log.Error().Err(err).Msg("ipc watcher")
			continue
		}
		recs = append(recs, rec)
	}
	rows.Close()
	for _, rec := range recs {
		if err := w.finish(ctx, rec, ""); err != nil && ctx.Err() == nil {
			w.cfg.Log.Error().Err(err).Msg("ipc watcher: finish recorded file")
		}
	}
}

// prune forgets finished files after a week; their files are long gone.
func (w *Watcher) prune(ctx context.Context) {
	w.logErr(ctx, w.markDone(ctx))
	if entries, err := os.ReadDir(w.cfg.IPCRoot); err == nil {
		for _, e := range entries {
			if e.IsDir() && e.Name() != ErrorsDir {
				w.pruneVerdicts(e.Name())
			}
		}
	}
	cutoff := w.now().Add(-7 * 24 * time.Hour).UnixMilli()
	if _, err := w.cfg.DB.ExecContext(ctx, `DELETE FROM ipc_files WHERE state IN ('done', 'failed') AND decided_at < ?`, cutoff); err != nil && ctx.Err() == nil {
		w.cfg.Log.Warn().Err(err).Msg("ipc watcher: prune")
	}
}
