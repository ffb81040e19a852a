package ipc

// The watcher in six parts: watch.go finds the files (fsnotify and
// rescans) and takes those available together as one batch; read.go reads
// one safely; decide.go judges it; journal.go records every file of the
// batch and does its database effect (effects.go: the outbox, the
// registry, the audit) in one transaction; finish.go then does what is
// left on disk, which is safe to repeat after a crash.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// TokenChecker is the part of *Tokens the watcher uses.
type TokenChecker interface {
	Check(ctx context.Context, folder, token string) (ok bool, owner string, err error)
}

// Config holds what a Watcher works with.
type Config struct {
	// Layout names every path: the IPC directories and the quarantine,
	// the groups' folders (a message's file must lie in its group's) and
	// where the daemon copies such a file.
	Layout layout.Layout
	DB     *store.DB
	Tokens TokenChecker
	Groups *groups.Registry
	// Tasks changes scheduled tasks inside the journal transaction.
	Tasks *scheduler.Scheduler
	// Where accepted files take effect: messages and reactions are queued
	// in Outbox (a reaction names its message's author, from Messages),
	// refusals audited and alerted by Alerts, and available_groups.json
	// rewritten by Snapshots. DefaultTrigger is the trigger of a group
	// registered without one (it follows config reloads).
	Outbox         *outbox.Outbox
	Messages       *messages.Store // also what search_history searches
	Alerts         *alerts.Reporter
	Snapshots      *Snapshots
	DefaultTrigger func() string
	// View is what a group's runs can read (RunView), which bounds the
	// files the daemon sends for it; nil treats every group as unconfined.
	View func(groups.Group) RunView
	// Reporter records a link the agent put where the daemon keeps a
	// directory (removed, never followed); nil records nothing.
	Reporter security.Reporter
	Log      zerolog.Logger
	// SafetyRescan is the period of a full rescan that catches anything
	// fsnotify missed; default one minute.
	SafetyRescan time.Duration
	// Location is the time zone of a search_history date (YYYY-MM-DD);
	// nil = the system's.
	Location *time.Location
}

// maxBatch bounds the files of one journal transaction, so that other
// writers of the database wait for it at most a few milliseconds.
const maxBatch = 256

// Watcher carries out the IPC files of every registered group. Only Run's
// goroutine handles files; Sync and Watch may be called from any.
type Watcher struct {
	cfg Config
	fx  effects
	fsw *fsnotify.Watcher
	now func() time.Time

	// open holds the journal entries whose file effects are not done yet,
	// by path; the journal is written only by Run, so this is exact.
	open map[ref]*entry

	errUse errorsUse       // what ipc/errors holds (quarantine.go)
	paused map[string]bool // groups whose IPC is paused by their own flood (pause.go)

	// syncMu makes Sync's reading of the registry and its changes to the
	// watched set one step, so a group registered by an IPC file (watched
	// once its record commits) is never unwatched by a Sync that read the
	// registry before it.
	syncMu sync.Mutex

	mu      sync.Mutex
	folders map[string]bool // watched
	// pending are the folders to scan, each with whether its directories
	// are to be made and watched again first (not after watch just did).
	pending map[string]bool
	kick    chan struct{}
}

// ref names one file: <dataDir>/ipc/<folder>/<sub>/<name>.
type ref struct{ folder, sub, name string }

func (r ref) String() string { return r.folder + "/" + r.sub + "/" + r.name }

// NewWatcher prepares <dataDir>/ipc/errors and an fsnotify watcher. Call
// Sync (before or after Run) and Run to start.
func NewWatcher(cfg Config) (*Watcher, error) {
	if cfg.SafetyRescan <= 0 {
		cfg.SafetyRescan = time.Minute
	}
	if err := mkdirPrivate(cfg.Layout.IPCErrors()); err != nil {
		return nil, err
	}
	fsw, err := fsnotify.NewBufferedWatcher(4096)
	if err != nil {
		return nil, fmt.Errorf("ipc watcher: %w", err)
	}
	w := &Watcher{cfg: cfg, fsw: fsw, now: time.Now, open: map[ref]*entry{}, paused: map[string]bool{}, folders: map[string]bool{},
		pending: map[string]bool{}, kick: make(chan struct{}, 1)}
	w.fx = daemonEffects{&w.cfg}
	return w, nil
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

// Sync watches the IPC directory of every registered group and of no other
// folder: call it at start and whenever the registry changed. It returns
// how many groups are registered.
func (w *Watcher) Sync(ctx context.Context) (int, error) {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	list, err := w.cfg.Groups.List(ctx)
	if err != nil {
		return 0, err
	}
	// On every CPU at once: each folder is a dozen system calls, and a
	// hundred groups took 15–30 ms of a daemon's start one by one.
	current := map[string]bool{}
	folders := make(chan string)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(list)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range folders {
				if err := w.watch(f); err != nil {
					w.logErr(ctx, err) // the others are watched all the same
				}
			}
		}()
	}
	for _, g := range list {
		current[g.Folder] = true
		folders <- g.Folder
	}
	close(folders)
	wg.Wait()
	w.mu.Lock()
	var gone []string
	for folder := range w.folders {
		if !current[folder] {
			gone = append(gone, folder)
			delete(w.folders, folder)
		}
	}
	w.mu.Unlock()
	for _, folder := range gone {
		for _, sub := range []string{layout.MessagesDir, layout.TasksDir} {
			_ = w.fsw.Remove(filepath.Join(string(w.cfg.Layout.IPC(folder)), sub))
		}
	}
	return len(list), nil
}

// Watch creates folder's messages/ and tasks/ (mode 0700), watches them and
// handles the files already there. It takes effect at once.
func (w *Watcher) Watch(folder string) error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	return w.watch(folder)
}

func (w *Watcher) watch(folder string) error {
	if err := groups.ValidFolder(folder); err != nil {
		return fmt.Errorf("watch ipc: %w", err)
	}
	files, err := w.ensureWatched(context.Background(), folder)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.folders[folder] = true
	if files {
		w.pending[folder] = w.pending[folder] // watched just now: no need to again, unless already asked
	}
	w.mu.Unlock()
	if files {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// ensureWatched makes folder's IPC directory and its messages/ and tasks/
// private real directories (a link the agent put there is removed and
// reported; the chmod acts on the real directory) and watches them. files
// tells whether they hold a request file already (or could not be
// listed): what comes after the watch brings its own event, so a folder
// without one needs no scan — with 100 groups that scan at start kept the
// daemon's threads busy well after 'running'.
func (w *Watcher) ensureWatched(ctx context.Context, folder string) (files bool, err error) {
	top, err := w.ipcDir(folder)
	if err != nil {
		return false, err
	}
	defer top.Close()
	if err := top.Chmod(0o700); err != nil {
		return false, err
	}
	for _, sub := range []string{layout.MessagesDir, layout.TasksDir} {
		d, err := top.Sub(ctx, sub, 0o700)
		if err != nil {
			return false, err
		}
		has, err := w.watchSub(d, folder, sub)
		d.Close()
		if err != nil {
			return false, err
		}
		files = files || has
	}
	return files, nil
}

// watchSub makes d, folder's sub directory, private and watches it; then
// it tells whether d holds a request file (or could not be listed).
func (w *Watcher) watchSub(d *groupfs.Dir, folder, sub string) (bool, error) {
	if err := d.Chmod(0o700); err != nil {
		return false, err
	}
	// fsnotify takes a path: a link swapped in since the check could
	// only bring events, and every read goes through groupfs again.
	dir := filepath.Join(string(w.cfg.Layout.IPC(folder)), sub)
	if err := w.fsw.Add(dir); err != nil {
		return false, fmt.Errorf("watch %s: %w", dir, err)
	}
	names, err := d.Names()
	return err != nil || slices.ContainsFunc(names, isRequest), nil
}

// isRequest tells a request file's name: *.json (a *.json.tmp is still
// being written, and is not one yet).
func isRequest(name string) bool { return strings.HasSuffix(name, ".json") }

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
	rel, err := filepath.Rel(w.cfg.Layout.IPCRoot(), ev.Name)
	if err != nil {
		return ref{}, false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	if len(parts) != 3 || (parts[1] != layout.MessagesDir && parts[1] != layout.TasksDir) || !strings.HasSuffix(parts[2], ".json") {
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
	rel, err := filepath.Rel(w.cfg.Layout.IPCRoot(), ev.Name)
	if err != nil {
		return
	}
	folder, sub, ok := strings.Cut(rel, string(filepath.Separator))
	if !ok || (sub != layout.MessagesDir && sub != layout.TasksDir) {
		return
	}
	w.mu.Lock()
	if w.folders[folder] {
		w.pending[folder] = true // and watched again
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
	for f, rewatch := range folders {
		w.scanFolder(ctx, f, rewatch)
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
		w.scanFolder(ctx, f, true)
	}
}

// scanFolder handles the files in folder's directories, in name order
// (NanoClaw names start with the time), maxBatch at a time. A paused
// group's files are drained a limited number per scan, and the scan goes
// on after the events and scans of the other groups (see pause.go).
// rewatch makes its directories and watches them again first: a deleted
// directory (or one an agent swapped for a link) loses its watch. The
// scan at start, right after Sync watched every folder, does not: doing
// it twice took half of the daemon's CPU in the milliseconds after
// "running" with 100 groups, while its local channel waited for a thread.
func (w *Watcher) scanFolder(ctx context.Context, folder string, rewatch bool) {
	if rewatch {
		if _, err := w.ensureWatched(ctx, folder); err != nil {
			w.cfg.Log.Error().Err(err).Str("group", folder).Msg("ipc watcher")
		}
	}
	refs, err := w.files(ctx, folder)
	if err != nil {
		w.cfg.Log.Error().Err(err).Str("group", folder).Msg("ipc watcher: scan")
	}
	w.checkBacklog(ctx, folder, len(refs))
	if w.paused[folder] && len(refs) > drainPerScan {
		refs = refs[:drainPerScan]
		w.again(folder)
	}
	for len(refs) > 0 && ctx.Err() == nil {
		n := min(len(refs), maxBatch)
		w.handle(ctx, refs[:n]...)
		refs = refs[n:]
	}
	if w.paused[folder] {
		// Scan again to see whether the drain emptied it, which lifts
		// the pause, after what else waits.
		w.again(folder)
	}
}

// drainPerScan bounds how many files of a paused group one scan drains
// before the watcher turns to the other groups' events.
const drainPerScan = 16 * maxBatch

// again asks for another scan of folder once Run is back in its loop.
func (w *Watcher) again(folder string) {
	w.mu.Lock()
	w.pending[folder] = true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// files lists the request files in folder's messages/ and tasks/, each in
// name order; a link there is replaced with a real directory (reported).
// What one directory held is listed also when the other fails.
func (w *Watcher) files(ctx context.Context, folder string) ([]ref, error) {
	top, err := w.ipcDir(folder)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	var refs []ref
	var errs []error
	for _, sub := range []string{layout.MessagesDir, layout.TasksDir} {
		names, err := subNames(ctx, top, sub)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range names {
			if isRequest(name) {
				refs = append(refs, ref{folder, sub, name})
			}
		}
	}
	return refs, errors.Join(errs...)
}

// subNames lists top's sub directory in name order.
func subNames(ctx context.Context, top *groupfs.Dir, sub string) ([]string, error) {
	d, err := top.Sub(ctx, sub, 0o700)
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
