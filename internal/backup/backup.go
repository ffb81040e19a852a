// Package backup makes and restores nanoclawd's archives: one tar.gz file
// with a consistent copy of each SQLite database (VACUUM INTO, which reads
// one snapshot while the daemon goes on writing, never a file copy of a
// live WAL database), the groups' folders, the agents' session
// directories, the main group's transcripts (kept by the Claude CLI in the
// owner's config dir), the config and nanoclawd.env, and a manifest with
// the SHA-256 of every file. The archive holds secrets (WhatsApp's device
// keys, the env file) and is written 0600.
package backup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// Names inside an archive: the manifest (the last entry) and the prefix
// of each part.
const (
	ManifestName   = "MANIFEST.json"
	dbPrefix       = "db/"
	groupsPrefix   = "groups/"
	sessionsPrefix = "sessions/"
	mainPrefix     = "main-sessions/" // the main group's Claude CLI project directory
	configPrefix   = "config/"
	configName     = configPrefix + "nanoclaw.config.jsonc"
	envName        = configPrefix + layout.EnvFile
)

// ConfigEntry is the config file's name in an archive.
const ConfigEntry = configName

// Archive files are named Prefix + UTC time + Suffix, so that names sort
// by age; backup.keep prunes only names of this shape.
const (
	Prefix = "nanoclawd-"
	Suffix = ".tar.gz"
)

// Sentinel errors.
var (
	// ErrCorrupt: the archive is damaged, truncated, not ours, or holds an
	// entry a restore must never write (a link, a path leaving its
	// directory).
	ErrCorrupt = errors.New("not a usable nanoclawd backup")
)

// Source is an installation's files: what a backup reads and a restore
// writes.
type Source struct {
	Layout     layout.Layout
	ConfigFile string
	EnvFile    string // beside the config
	// ClaudeDir is the Claude config dir of the main group's runs. Unlike
	// a confined group's, the main group's transcripts are not in the data
	// dir: it runs as the owner, with their HOME, and the CLI keeps them
	// in its own store there (layout.ClaudeProject). "": left out.
	ClaudeDir string
	// Main names the main group's folder when a backup is made (false:
	// none is registered). Nil: the main group's transcripts are left out.
	Main func(ctx context.Context) (folder string, ok bool)
}

// NewSource is the installation of the config file at configFile with
// these data and groups directories, the main group's runs using the
// Claude config dir claudeDir.
func NewSource(l layout.Layout, configFile, claudeDir string) Source {
	return Source{Layout: l, ConfigFile: configFile, EnvFile: filepath.Join(filepath.Dir(configFile), layout.EnvFile), ClaudeDir: claudeDir}
}

// mainProject is where the main group's runs keep their transcripts when
// its folder is folder: the CLI names the directory after the working
// directory as the kernel reports it, links resolved.
func (s Source) mainProject(folder string) string {
	return layout.ClaudeProject(s.ClaudeDir, realPath(s.Layout.Group(folder)))
}

// realPath is p with its links resolved as far as it exists.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	if dir := filepath.Dir(p); dir != p {
		return filepath.Join(realPath(dir), filepath.Base(p))
	}
	return p
}

// Options shape Create.
type Options struct {
	// Verify reads the archive back before it is given its name: every
	// checksum, and PRAGMA integrity_check on each database copy.
	Verify bool
	// Keep, when > 0, deletes the oldest archives in the directory beyond
	// the newest Keep (backup.keep of scheduled backups).
	Keep int
	// Progress, when set, gets a line now and then during long work.
	Progress func(string)
	// Now is the clock that names the archive (time.Now when nil).
	Now func() time.Time
}

// Result is what Create made.
type Result struct {
	Archive  string
	Files    int
	Bytes    int64 // the archive's size
	Verified bool
	Skipped  []Skipped // what was left out, and why
	Pruned   []string  // older archives deleted for Keep
}

// Create writes one archive of src into dir and returns its path. The
// archive is built under a hidden temporary name in dir and renamed once
// complete (and verified), so dir never holds half an archive under an
// archive's name; on error nothing is left behind.
func Create(ctx context.Context, src Source, dir string, o Options) (Result, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Result{}, fmt.Errorf("backup: create %s: %w", dir, err)
	}
	// The database copies are made outside dir, in a private directory of
	// their own, so dir only ever receives the archive.
	stage, err := os.MkdirTemp("", "nanoclawd-backup-")
	if err != nil {
		return Result{}, fmt.Errorf("backup: temporary directory: %w", err)
	}
	defer os.RemoveAll(stage)
	f, err := os.CreateTemp(dir, ".nanoclawd-backup-*.partial") // 0600
	if err != nil {
		return Result{}, fmt.Errorf("backup: write in %s: %w (check that the directory is writable)", dir, err)
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	w := newWriter(f, stage, progress)
	w.manifest.Created = now().UTC()
	w.manifest.Source = SourcePaths{Config: src.ConfigFile, DataDir: src.Layout.DataDir, GroupsDir: src.Layout.GroupsDir}
	for _, db := range []string{src.Layout.DB(), src.Layout.WhatsAppDB()} {
		name := dbPrefix + filepath.Base(db)
		if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
			w.skip(name, "absent (never created on this install)")
			continue
		}
		progress("copying " + filepath.Base(db))
		copyPath := filepath.Join(stage, filepath.Base(db))
		if err := vacuumInto(ctx, db, copyPath); err != nil {
			return Result{}, err
		}
		if err := w.addStaged(name, copyPath, 0o600); err != nil {
			return Result{}, err
		}
	}
	if err := w.addTree(ctx, groupsPrefix, src.Layout.GroupsDir); err != nil {
		return Result{}, err
	}
	if err := w.addTree(ctx, sessionsPrefix, src.Layout.Sessions()); err != nil {
		return Result{}, err
	}
	if folder, ok := src.mainFolder(ctx); ok {
		dir := src.mainProject(folder)
		w.manifest.Source.MainFolder, w.manifest.Source.MainSessions = folder, dir
		if err := w.addTree(ctx, mainPrefix, dir); err != nil {
			return Result{}, err
		}
	}
	for name, path := range map[string]string{configName: src.ConfigFile, envName: src.EnvFile} {
		if err := w.addFile(name, path); errors.Is(err, fs.ErrNotExist) {
			w.skip(name, "absent")
		} else if err != nil {
			return Result{}, err
		}
	}
	if err := w.close(); err != nil {
		return Result{}, fmt.Errorf("backup: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return Result{}, fmt.Errorf("backup: write %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return Result{}, fmt.Errorf("backup: write %s: %w", tmp, err)
	}
	res := Result{Files: len(w.manifest.Files), Skipped: w.manifest.Skipped}
	if o.Verify {
		progress("verifying")
		if _, err := Verify(ctx, tmp, true); err != nil {
			return Result{}, fmt.Errorf("backup: the archive just written does not verify: %w", err)
		}
		res.Verified = true
	}
	if res.Archive, err = publish(tmp, dir, w.manifest.Created); err != nil {
		return Result{}, err
	}
	done = true
	if fi, err := os.Stat(res.Archive); err == nil {
		res.Bytes = fi.Size()
	}
	if o.Keep > 0 {
		res.Pruned, err = Prune(dir, o.Keep)
	}
	return res, err
}

// mainFolder is the main group's folder, if its transcripts are to be
// archived.
func (s Source) mainFolder(ctx context.Context) (string, bool) {
	if s.ClaudeDir == "" || s.Main == nil {
		return "", false
	}
	return s.Main(ctx)
}

// vacuumInto writes a consistent, compacted copy of the SQLite database at
// db to dst. VACUUM INTO reads inside one read transaction, so the copy is
// one moment of the database while other processes keep writing (WAL).
func vacuumInto(ctx context.Context, db, dst string) error {
	conn, err := sql.Open("sqlite3", "file:"+db+"?_busy_timeout=10000")
	if err != nil {
		return fmt.Errorf("backup: open %s: %w", db, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return fmt.Errorf("backup: copy %s: %w", db, err)
	}
	return nil
}

// publish gives the finished archive at tmp its name in dir: the creation
// time, with "-2", "-3", … should that name be taken. os.Link never
// replaces an existing file, unlike a rename.
func publish(tmp, dir string, created time.Time) (string, error) {
	base := Prefix + created.Format("20060102T150405Z")
	for i := 1; ; i++ {
		name := base + Suffix
		if i > 1 {
			name = fmt.Sprintf("%s-%d%s", base, i, Suffix)
		}
		final := filepath.Join(dir, name)
		err := os.Link(tmp, final)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			// A file system without hard links: a rename, after the name
			// was found free.
			if _, serr := os.Lstat(final); !errors.Is(serr, fs.ErrNotExist) {
				continue
			}
			if err = os.Rename(tmp, final); err != nil {
				return "", fmt.Errorf("backup: name the archive %s: %w", final, err)
			}
			return final, nil
		}
		os.Remove(tmp)
		return final, nil
	}
}

// Prune deletes the oldest archives in dir beyond the newest keep, and
// returns their paths. Only files named like an archive are touched.
func Prune(dir string, keep int) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("backup: list %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), Prefix) && strings.HasSuffix(e.Name(), Suffix) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names) // the time in the name sorts oldest first
	var pruned []string
	for len(names) > keep {
		p := filepath.Join(dir, names[0])
		if err := os.Remove(p); err != nil {
			return pruned, fmt.Errorf("backup: delete old archive: %w", err)
		}
		pruned = append(pruned, p)
		names = names[1:]
	}
	return pruned, nil
}
