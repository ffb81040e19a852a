package ipc

// The watcher in five parts: watch.go finds the files (fsnotify and
// rescans) and takes those available together as one batch; read.go reads
// one safely; decide.go judges it; journal.go records every file of the
// batch and does its database effect in one transaction; effects.go then
// does what is left on disk, which is safe to repeat after a crash.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
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
// run inside the journal transaction that records the file.
type Tasks interface {
	Create(ctx context.Context, tx *store.Tx, nt scheduler.NewTask) (scheduler.Task, error)
	Get(ctx context.Context, id string) (scheduler.Task, error)
	Pause(ctx context.Context, tx *store.Tx, id string) error
	Resume(ctx context.Context, tx *store.Tx, id string) error
	Cancel(ctx context.Context, tx *store.Tx, id string) error
	Update(ctx context.Context, tx *store.Tx, id string, u scheduler.Update) error
	Changed()
}

// NewGroup is what register_group asks for.
type NewGroup struct {
	JID, Name, Folder string
	Trigger           string   // "" = the default trigger (@assistantName)
	RequiresTrigger   bool     // true unless the file says false
	Senders           []string // who may call its assistant; nil = everyone
}

// Effects are what files do to the rest of the daemon, which implements
// them. The Tx methods run inside the journal transaction that records the
// file, so an effect happens exactly when its record commits: once, even
// across a kill -9. id is the file's journal row, never handed out twice.
type Effects interface {
	// SendMessageTx queues text for chatJID; file, when not nil, is the
	// daemon's copy of the file it carries, which the message owns once
	// tx commits.
	SendMessageTx(ctx context.Context, tx *store.Tx, id int64, fromFolder, chatJID, text string, file *channel.Attachment) error
	// ReactTx queues a reaction with emoji to the chat's message messageID.
	ReactTx(ctx context.Context, tx *store.Tx, id int64, fromFolder, chatJID, messageID, emoji string) error
	// RegisterGroupTx registers g, creating its folder; registering the
	// same jid and folder again must succeed. An error wrapping one of
	// groups' sentinel errors refuses the file.
	RegisterGroupTx(ctx context.Context, tx *store.Tx, id int64, g NewGroup) error
	// RefusedTx audits a refused file; alert says it also goes to the
	// main group (wrong token or cross-group attempt).
	RefusedTx(ctx context.Context, tx *store.Tx, id int64, v security.Violation, alert bool) error
	// Committed follows each journal commit (and a restart's unfinished
	// files): it wakes what carries the effects on (the audit log; the
	// outbox wakes itself when a message it queued commits).
	Committed(ctx context.Context)
	// RefreshGroups rewrites the group snapshot after the commit; it may
	// be repeated.
	RefreshGroups(ctx context.Context) error
}

// Config holds what a Watcher works with.
type Config struct {
	IPCRoot string // <dataDir>/ipc
	// Layout names the groups' folders (a message's file must lie in its
	// group's) and where the daemon copies such a file.
	Layout  layout.Layout
	DB      *store.DB
	Tokens  TokenChecker
	Groups  Groups
	Tasks   Tasks
	Effects Effects
	// Reporter records a link the agent put where the daemon keeps a
	// directory (removed, never followed); nil records nothing.
	Reporter groupfs.Reporter
	Log      zerolog.Logger
	// SafetyRescan is the period of a full rescan that catches anything
	// fsnotify missed; default one minute.
	SafetyRescan time.Duration
}

// maxBatch bounds the files of one journal transaction, so that other
// writers of the database wait for it at most a few milliseconds.
const maxBatch = 256

// Watcher carries out the IPC files of every watched group. Only Run's
// goroutine handles files; Watch and Unwatch may be called from any.
type Watcher struct {
	cfg Config
	fsw *fsnotify.Watcher
	now func() time.Time

	// open holds the journal entries whose file effects are not done yet,
	// by path; the journal is written only by Run, so this is exact.
	open map[ref]*entry

	mu      sync.Mutex
	folders map[string]bool // watched
	pending map[string]bool // to scan
	kick    chan struct{}
}

// ref names one file: <IPCRoot>/<folder>/<sub>/<name>.
type ref struct{ folder, sub, name string }

func (r ref) String() string { return r.folder + "/" + r.sub + "/" + r.name }

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
	return &Watcher{cfg: cfg, fsw: fsw, now: time.Now, open: map[ref]*entry{}, folders: map[string]bool{},
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
	if err := w.ensureWatched(context.Background(), folder); err != nil {
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

// ensureWatched makes folder's IPC directory and its messages/ and tasks/
// private real directories (a link the agent put there is removed and
// reported; the chmod acts on the real directory) and watches them.
func (w *Watcher) ensureWatched(ctx context.Context, folder string) error {
	top, err := w.ipcDir(folder)
	if err != nil {
		return err
	}
	defer top.Close()
	if err := top.Chmod(0o700); err != nil {
		return err
	}
	for _, sub := range []string{MessagesDir, TasksDir} {
		d, err := top.Sub(ctx, sub, 0o700)
		if err != nil {
			return err
		}
		err = d.Chmod(0o700)
		d.Close()
		if err != nil {
			return err
		}
		// fsnotify takes a path: a link swapped in since the check could
		// only bring events, and every read goes through groupfs again.
		dir := filepath.Join(w.cfg.IPCRoot, folder, sub)
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

// Run handles files until ctx ends: first what a crash left unfinished,
// then the files present at start, then each file as it appears.
func (w *Watcher) Run(ctx context.Context) error {
	defer w.fsw.Close()
	if err := w.loadOpen(ctx); err != nil {
		return err
	}
	w.resume(ctx)
	w.scanPending(ctx)
	tick := time.NewTicker(w.cfg.SafetyRescan)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.fsw.Events:
			if !ok {
				return errors.New("ipc watcher: fsnotify closed")
			}
			w.handle(ctx, w.gather(ev)...)
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
			w.resume(ctx)
			w.scanAll(ctx)
			w.prune(ctx)
		}
	}
}

// gather is the files of ev and of every event already queued behind it:
// the files available together, which the journal takes in one
// transaction. It never waits for more.
func (w *Watcher) gather(ev fsnotify.Event) []ref {
	var refs []ref
	seen := map[ref]bool{}
	for {
		w.dirGone(ev)
		if r, ok := w.fileOf(ev); ok && !seen[r] {
			seen[r] = true
			refs = append(refs, r)
		}
		if len(refs) >= maxBatch {
			return refs
		}
		select {
		case ev = <-w.fsw.Events:
		default:
			return refs
		}
	}
}

// fileOf is the IPC file an event is about, if it is one to handle.
func (w *Watcher) fileOf(ev fsnotify.Event) (ref, bool) {
	if !ev.Has(fsnotify.Create) && !ev.Has(fsnotify.Write) {
		return ref{}, false
	}
	rel, err := filepath.Rel(w.cfg.IPCRoot, ev.Name)
	if err != nil {
		return ref{}, false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if len(parts) != 3 || (parts[1] != MessagesDir && parts[1] != TasksDir) || !strings.HasSuffix(parts[2], ".json") {
		return ref{}, false
	}
	w.mu.Lock()
	watched := w.folders[parts[0]]
	w.mu.Unlock()
	return ref{parts[0], parts[1], parts[2]}, watched
}

// dirGone notes a watched messages/ or tasks/ that was removed or renamed
// (an agent may swap it for a link): its folder is scanned again at once,
// which puts a real, watched directory back.
func (w *Watcher) dirGone(ev fsnotify.Event) {
	if !ev.Has(fsnotify.Remove) && !ev.Has(fsnotify.Rename) {
		return
	}
	rel, err := filepath.Rel(w.cfg.IPCRoot, ev.Name)
	if err != nil {
		return
	}
	folder, sub, ok := strings.Cut(rel, string(filepath.Separator))
	if !ok || (sub != MessagesDir && sub != TasksDir) {
		return
	}
	w.mu.Lock()
	if w.folders[folder] {
		w.pending[folder] = true
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
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
		w.scanFolder(ctx, f)
	}
}

// scanFolder handles the files in folder's directories, in name order
// (NanoClaw names start with the time), maxBatch at a time.
func (w *Watcher) scanFolder(ctx context.Context, folder string) {
	// A deleted directory (or one an agent swapped for a link) loses its
	// watch; bring both back.
	if err := w.ensureWatched(ctx, folder); err != nil {
		w.cfg.Log.Error().Err(err).Str("group", folder).Msg("ipc watcher")
	}
	for _, sub := range []string{MessagesDir, TasksDir} {
		names, err := w.names(ctx, folder, sub)
		if err != nil {
			w.cfg.Log.Error().Err(err).Str("group", folder).Msg("ipc watcher: scan")
			continue
		}
		var refs []ref
		for _, name := range names {
			if strings.HasSuffix(name, ".json") {
				refs = append(refs, ref{folder, sub, name})
			}
		}
		for len(refs) > 0 && ctx.Err() == nil {
			n := min(len(refs), maxBatch)
			w.handle(ctx, refs[:n]...)
			refs = refs[n:]
		}
	}
}

// subDir opens folder's messages/ or tasks/ directory (sub), replacing a
// link there with a real directory (reported).
func (w *Watcher) subDir(ctx context.Context, folder, sub string) (*groupfs.Dir, error) {
	top, err := w.ipcDir(folder)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	return top.Sub(ctx, sub, 0o700)
}

// names lists folder's sub directory in name order.
func (w *Watcher) names(ctx context.Context, folder, sub string) ([]string, error) {
	d, err := w.subDir(ctx, folder, sub)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Names()
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func (w *Watcher) logErr(ctx context.Context, err error) {
	if err != nil && ctx.Err() == nil {
		w.cfg.Log.Error().Err(err).Msg("ipc watcher")
	}
}
