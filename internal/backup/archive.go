package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"
)

// Manifest is the archive's last entry: what it holds and each file's
// checksum.
type Manifest struct {
	Format  int         `json:"format"`
	Note    string      `json:"note"`
	Created time.Time   `json:"created"`
	Source  SourcePaths `json:"source"`
	Files   []File      `json:"files"`
	Skipped []Skipped   `json:"skipped,omitempty"`
}

// SourcePaths are where the archived install lived.
type SourcePaths struct {
	Config    string `json:"config"`
	DataDir   string `json:"dataDir"`
	GroupsDir string `json:"groupsDir"`
	// MainFolder is the main group's folder, whose transcripts are under
	// main-sessions/; MainSessions is where they were.
	MainFolder   string `json:"mainFolder,omitempty"`
	MainSessions string `json:"mainSessions,omitempty"`
}

// File is one archived file.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Skipped is something left out of the archive, and why.
type Skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

const (
	manifestFormat = 1
	secretsNote    = "This archive holds secrets: WhatsApp's device keys (db/whatsapp.db) and nanoclawd.env. " +
		"Keep it private (mode 0600) and restore it with `nanoclawd restore`."
)

// writer streams files into a tar.gz and collects the manifest.
type writer struct {
	tw       *tar.Writer
	gz       *gzip.Writer
	stage    string // a private directory for staging copies
	manifest Manifest
	progress func(string)
	lastNote time.Time
}

func newWriter(out io.Writer, stage string, progress func(string)) *writer {
	gz := gzip.NewWriter(out)
	return &writer{tw: tar.NewWriter(gz), gz: gz, stage: stage, progress: progress, lastNote: time.Now(),
		manifest: Manifest{Format: manifestFormat, Note: secretsNote}}
}

func (w *writer) skip(name, reason string) {
	w.manifest.Skipped = append(w.manifest.Skipped, Skipped{Path: name, Reason: reason})
}

// addTree adds every regular file under dir as prefix + its relative
// path. Agents can write in these directories, so nothing is followed:
// the walk stays inside dir (os.Root), a symlink is left out and noted,
// and each file is opened with O_NOFOLLOW. A missing dir adds nothing.
func (w *writer) addTree(ctx context.Context, prefix, dir string) error {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup: open %s: %w", dir, err)
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == "." {
				return fmt.Errorf("backup: read %s: %w", dir, err)
			}
			// A directory a confined run made under another uid: noted,
			// and the rest of the tree still archived.
			w.skip(prefix+rel, "unreadable: "+err.Error())
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		name := prefix + rel
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			w.skip(name, "a symbolic link (never followed)")
			return nil
		case !d.Type().IsRegular():
			w.skip(name, "not a regular file")
			return nil
		}
		f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // deleted while we walked: it is not part of this backup
			}
			w.skip(name, "unreadable: "+err.Error())
			return nil
		}
		defer f.Close()
		return w.addOpen(name, f)
	})
}

// addFile adds the regular file at p as name (fs.ErrNotExist if absent).
func (w *writer) addFile(name, p string) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return fmt.Errorf("backup: read %s: %w", p, err)
	}
	defer f.Close()
	return w.addOpen(name, f)
}

// addOpen copies the open file f to a staging file first, hashing it on
// the way: a file that grows or shrinks while it is read (an agent at
// work) is archived as read, and the tar header's size is right.
func (w *writer) addOpen(name string, f *os.File) error {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		w.skip(name, "not a regular file")
		return nil
	}
	staged := filepath.Join(w.stage, "file")
	out, err := os.OpenFile(staged, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("backup: stage %s: %w", name, err)
	}
	_, err = io.Copy(out, f)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup: read %s: %w", f.Name(), err)
	}
	return w.addStaged(name, staged, fi.Mode().Perm())
}

// addStaged adds the file at p (ours, not changing) as name.
func (w *writer) addStaged(name, p string, mode fs.FileMode) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: fi.Size(), Mode: int64(mode.Perm()), ModTime: fi.ModTime(), Format: tar.FormatPAX}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("backup: archive %s: %w", name, err)
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(w.tw, h), f); err != nil {
		return fmt.Errorf("backup: archive %s: %w", name, err)
	}
	w.manifest.Files = append(w.manifest.Files, File{Path: name, Size: fi.Size(), SHA256: hex.EncodeToString(h.Sum(nil))})
	if time.Since(w.lastNote) > 2*time.Second {
		w.lastNote = time.Now()
		w.progress(fmt.Sprintf("%d files archived (now %s)", len(w.manifest.Files), path.Dir(name)))
	}
	return nil
}

// close appends the manifest and ends the tar and gzip streams.
func (w *writer) close() error {
	body, err := json.MarshalIndent(w.manifest, "", "  ")
	if err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: ManifestName, Size: int64(len(body)), Mode: 0o600, ModTime: w.manifest.Created}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := w.tw.Write(body); err != nil {
		return err
	}
	if err := w.tw.Close(); err != nil {
		return err
	}
	return w.gz.Close()
}
