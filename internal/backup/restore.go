package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/layout"
)

// Action is one file a restore writes.
type Action struct {
	Entry   string // the file's name in the archive
	Target  string // the absolute path written ("" when nothing is written)
	Replace bool   // Target exists and is replaced
	// Kept is the config or env file of the target install, which a
	// restore never overwrites: when the archived one differs it goes to
	// Target = Kept + ".restored"; when it is the same nothing is written.
	Kept string

	base, rel string // Target is rel inside base (place)
}

// RestoredSuffix marks an archived config or env file written beside the
// install's own.
const RestoredSuffix = ".restored"

// place is where the archive's file name goes in dst, for an archive of
// the install at from: a base directory and a path below it. The Claude
// CLI names a session's directory after its group's folder path
// (layout.ClaudeProject), so transcripts go under the name the folder has
// in dst: the main group's in dst's Claude config dir, a confined group's
// in its session directory.
func (s Source) place(from SourcePaths, name string) (base, rel string, ok bool) {
	switch {
	case name == dbPrefix+filepath.Base(s.Layout.DB()), name == dbPrefix+filepath.Base(s.Layout.WhatsAppDB()):
		return s.Layout.DataDir, strings.TrimPrefix(name, dbPrefix), true
	case strings.HasPrefix(name, mainPrefix):
		if from.MainFolder == "" || s.ClaudeDir == "" {
			return "", "", false
		}
		return s.mainProject(from.MainFolder), filepath.FromSlash(strings.TrimPrefix(name, mainPrefix)), true
	case strings.HasPrefix(name, sessionsPrefix):
		return s.Layout.Sessions(), filepath.FromSlash(s.renamed(from, strings.TrimPrefix(name, sessionsPrefix))), true
	case strings.HasPrefix(name, groupsPrefix):
		return s.Layout.GroupsDir, filepath.FromSlash(strings.TrimPrefix(name, groupsPrefix)), true
	case name == configName:
		return filepath.Dir(s.ConfigFile), filepath.Base(s.ConfigFile), true
	case name == envName:
		return filepath.Dir(s.EnvFile), filepath.Base(s.EnvFile), true
	}
	return "", "", false
}

// renamed is rel, a path in the sessions directory, with a confined
// group's project directory (FOLDER/claude/projects/NAME/…) named after the
// group's folder in s rather than in from.
func (s Source) renamed(from SourcePaths, rel string) string {
	part := strings.SplitN(rel, "/", 5)
	if len(part) < 5 || part[1] != layout.SessionClaudeDir || part[2] != "projects" ||
		part[3] != filepath.Base(layout.ClaudeProject("", filepath.Join(from.GroupsDir, part[0]))) {
		return rel
	}
	part[3] = filepath.Base(layout.ClaudeProject("", s.Layout.Group(part[0])))
	return strings.Join(part, "/")
}

// Plan verifies the archive at p (checksums and each database's
// integrity) and says what restoring it into dst would write.
func Plan(ctx context.Context, p string, dst Source) ([]Action, *Manifest, error) {
	m, err := Verify(ctx, p, true)
	if err != nil {
		return nil, nil, err
	}
	var plan []Action
	for _, f := range m.Files {
		base, rel, ok := dst.place(m.Source, f.Path)
		if !ok && strings.HasPrefix(f.Path, mainPrefix) && m.Source.MainFolder != "" {
			return nil, nil, fmt.Errorf("restore: the archive holds the main group's transcripts, and nothing says where its runs keep them: set HOME (or pass CLAUDE_CONFIG_DIR through agent.env)")
		}
		if !ok {
			return nil, nil, fmt.Errorf("%w: %s: %s belongs nowhere in an install", ErrCorrupt, p, f.Path)
		}
		a := Action{Entry: f.Path, Target: filepath.Join(base, rel), base: base, rel: rel}
		if f.Path == configName || f.Path == envName {
			if same, exists := sameContent(a.Target, f.SHA256); exists {
				a.Kept = a.Target
				a.Target = ""
				if !same {
					a.Target = a.Kept + RestoredSuffix
				}
			}
		}
		if a.Target != "" {
			if _, err := os.Lstat(a.Target); err == nil {
				a.Replace = true
			}
		}
		plan = append(plan, a)
	}
	return plan, m, nil
}

// sameContent says whether the file at p exists and has the checksum sum.
func sameContent(p, sum string) (same, exists bool) {
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false
	}
	h := sha256.Sum256(b)
	return err == nil && hex.EncodeToString(h[:]) == sum, true
}

// Apply writes the archive's files as plan says. The caller holds the
// target's daemon lock. Each file is written beside its target and
// renamed over it, inside its base directory opened as an os.Root, so a
// link found in the target tree is replaced, never followed out of it. A
// database's old -wal and -shm files are removed first: SQLite would
// otherwise apply a stale log to the restored file.
func Apply(ctx context.Context, p string, dst Source, plan []Action) error {
	byEntry := map[string]Action{}
	for _, a := range plan {
		byEntry[a.Entry] = a
	}
	roots := map[string]*os.Root{}
	defer func() {
		for _, r := range roots {
			r.Close()
		}
	}()
	_, err := walk(p, func(e entry) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a, ok := byEntry[e.name]
		if !ok || a.Target == "" {
			return nil
		}
		base, rel := a.base, a.rel
		if a.Kept != "" {
			rel += RestoredSuffix
		}
		root, err := openRoot(roots, base)
		if err != nil {
			return err
		}
		if strings.HasPrefix(e.name, dbPrefix) {
			for _, j := range layout.SQLiteFiles(rel)[1:] {
				if err := root.Remove(j); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("restore: remove the old %s: %w", filepath.Join(base, j), err)
				}
			}
		}
		if err := writeIn(root, rel, e.r, fs.FileMode(e.mode)&0o777); err != nil {
			return fmt.Errorf("restore: write %s: %w", a.Target, err)
		}
		return nil
	})
	return err
}

func openRoot(roots map[string]*os.Root, base string) (*os.Root, error) {
	if r, ok := roots[base]; ok {
		return r, nil
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("restore: create %s: %w", base, err)
	}
	r, err := os.OpenRoot(base)
	if err != nil {
		return nil, fmt.Errorf("restore: open %s: %w", base, err)
	}
	roots[base] = r
	return r, nil
}

// writeIn writes r to rel inside root, creating its directories; the
// file is written beside rel, synced and renamed over it (atomicfile).
func writeIn(root *os.Root, rel string, r io.Reader, mode fs.FileMode) error {
	if dir := filepath.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	// The owner keeps reading and writing what it restored.
	return atomicfile.CopyIn(root, rel, r, mode|0o600)
}
