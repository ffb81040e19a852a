package backup

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	_ "github.com/mattn/go-sqlite3" // the "sqlite3" driver
)

// entry is one file of an archive as read.
type entry struct {
	name string
	mode int64
	r    io.Reader
}

// walk reads the archive at p and calls fn for each regular file except
// the manifest, then checks every file against the manifest and returns
// it. Anything a restore must not write, or that does not match, fails
// the whole walk with ErrCorrupt: names that are absolute or leave their
// directory, links, devices, a missing or unreadable manifest, a checksum
// that differs, a file not in the manifest or missing from the archive.
func walk(p string, fn func(e entry) error) (*Manifest, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("open archive: %w", err)
	}
	defer f.Close()
	corrupt := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrCorrupt, p, fmt.Sprintf(format, a...))
	}
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, corrupt("not a gzip file (%v)", err)
	}
	tr := tar.NewReader(gz)
	seen := map[string]string{} // name → sha256
	var m *Manifest
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, corrupt("damaged after %d files (%v)", len(seen), err)
		}
		if m != nil {
			return nil, corrupt("%s after the manifest, which must be the last entry", hdr.Name)
		}
		if !safeName(hdr.Name) {
			return nil, corrupt("entry %q leaves the directory it belongs to", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, corrupt("entry %q is a link or special file, which a backup never holds", hdr.Name)
		}
		if hdr.Name == ManifestName {
			m = new(Manifest)
			if err := json.NewDecoder(io.LimitReader(tr, 64<<20)).Decode(m); err != nil {
				return nil, corrupt("unreadable manifest (%v)", err)
			}
			continue
		}
		if _, dup := seen[hdr.Name]; dup {
			return nil, corrupt("%s appears twice", hdr.Name)
		}
		h := sha256.New()
		// A read that fails is damage in the archive, whoever reads.
		r := readerFunc(func(b []byte) (int, error) {
			n, err := tr.Read(b)
			if err != nil && !errors.Is(err, io.EOF) {
				err = corrupt("damaged in %s (%v)", hdr.Name, err)
			}
			h.Write(b[:n])
			return n, err
		})
		if fn != nil {
			if err := fn(entry{name: hdr.Name, mode: hdr.Mode, r: r}); err != nil {
				return nil, err
			}
		}
		if _, err := io.Copy(io.Discard, r); err != nil { // what fn did not read
			return nil, err
		}
		seen[hdr.Name] = hex.EncodeToString(h.Sum(nil))
	}
	if m == nil {
		return nil, corrupt("no %s (truncated, or not made by `nanoclawd backup`)", ManifestName)
	}
	if m.Format != manifestFormat {
		return nil, corrupt("manifest format %d, this nanoclawd reads %d", m.Format, manifestFormat)
	}
	for _, mf := range m.Files {
		got, ok := seen[mf.Path]
		if !ok {
			return nil, corrupt("%s is in the manifest but not in the archive", mf.Path)
		}
		if got != mf.SHA256 {
			return nil, corrupt("%s does not match its checksum", mf.Path)
		}
		delete(seen, mf.Path)
	}
	for name := range seen {
		return nil, corrupt("%s is not in the manifest", name)
	}
	return m, nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(b []byte) (int, error) { return f(b) }

// safeName: a relative, clean, slash-separated path below one of the
// archive's own parts (or the manifest).
func safeName(name string) bool {
	if name == ManifestName {
		return true
	}
	if !filepath.IsLocal(name) || path.Clean(name) != strings.TrimSuffix(name, "/") || strings.Contains(name, "\\") {
		return false
	}
	for _, p := range []string{dbPrefix, groupsPrefix, sessionsPrefix, mainPrefix, configPrefix} {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	return false
}

// Verify reads the archive at p and checks every file against its
// checksum in the manifest; with checkDB it also opens each database copy
// and runs PRAGMA integrity_check on it. The error wraps ErrCorrupt when
// the archive is not one to restore.
func Verify(ctx context.Context, p string, checkDB bool) (*Manifest, error) {
	var dbs []string
	stage := ""
	if checkDB {
		var err error
		if stage, err = os.MkdirTemp("", "nanoclawd-verify-"); err != nil {
			return nil, fmt.Errorf("verify: temporary directory: %w", err)
		}
		defer os.RemoveAll(stage)
	}
	m, err := walk(p, func(e entry) error {
		if !checkDB || !strings.HasPrefix(e.name, dbPrefix) {
			return nil
		}
		dst := filepath.Join(stage, path.Base(e.name))
		if err := writeFile(dst, e.r); err != nil {
			if errors.Is(err, ErrCorrupt) {
				return err
			}
			return fmt.Errorf("verify: %w", err)
		}
		dbs = append(dbs, dst)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, db := range dbs {
		if err := integrityCheck(ctx, db); err != nil {
			return nil, fmt.Errorf("%w: %s: %s: %v", ErrCorrupt, p, dbPrefix+filepath.Base(db), err)
		}
	}
	return m, nil
}

func writeFile(dst string, r io.Reader) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// integrityCheck opens the SQLite file at db read-only and runs PRAGMA
// integrity_check.
func integrityCheck(ctx context.Context, db string) error {
	conn, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		return err
	}
	defer conn.Close()
	var res string
	if err := conn.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res); err != nil {
		return fmt.Errorf("not a readable SQLite database (%v)", err)
	}
	if res != "ok" {
		return fmt.Errorf("integrity_check says %q", res)
	}
	return nil
}
