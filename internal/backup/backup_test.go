package backup

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/store"
)

// install makes an install under a temp dir with a database that has
// rows, a group folder, a session, a config and an env file.
func install(t *testing.T) Source {
	t.Helper()
	dir := t.TempDir()
	src := NewSource(layout.New(filepath.Join(dir, "data"), filepath.Join(dir, "groups")), filepath.Join(dir, "nanoclaw.config.jsonc"),
		filepath.Join(dir, "home", ".claude"))
	src.Main = func(context.Context) (string, bool) { return "main", true }
	db, err := store.Open(src.Layout.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mustExec(t, db, `CREATE TABLE IF NOT EXISTS probe (n INTEGER)`)
	write(t, filepath.Join(src.Layout.Session("family"), "home", "s.jsonl"), `{"session":"abc"}`)
	write(t, src.Layout.GroupMemory("family"), "# family\nremember the milk\n")
	write(t, src.ConfigFile, `{"assistantName": "Andy"}`)
	write(t, src.EnvFile, "ANTHROPIC_API_KEY=sk-secret\n")
	return src
}

// fresh is an empty install to restore into, its directories apart from
// each other.
func fresh(t *testing.T) Source {
	return NewSource(layout.New(filepath.Join(t.TempDir(), "d"), filepath.Join(t.TempDir(), "g")), filepath.Join(t.TempDir(), "nanoclaw.config.jsonc"),
		filepath.Join(t.TempDir(), ".claude"))
}

func write(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustExec(t *testing.T, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, dbPath string) int {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM probe`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A backup taken while another connection keeps committing rows is one
// consistent moment: it verifies, and restored into a fresh install it
// holds every row committed before it started and the files byte for byte.
func TestBackupWhileWritingThenRestore(t *testing.T) {
	src := install(t)
	db, err := sql.Open("sqlite3", store.DSN(src.Layout.DB()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 100 {
		mustExec(t, db, `INSERT INTO probe VALUES (1)`)
	}
	// A link an agent planted in its folder, pointing at a secret.
	secret := filepath.Join(t.TempDir(), "secret")
	write(t, secret, "do not archive")
	if err := os.Symlink(secret, filepath.Join(src.Layout.Group("family"), "link")); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Int64
	wg.Go(func() {
		for !stop.Load() {
			if _, err := db.Exec(`INSERT INTO probe VALUES (2)`); err != nil {
				t.Error(err)
				return
			}
			writes.Add(1)
		}
	})
	for writes.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	out := t.TempDir()
	var lines []string
	res, err := Create(context.Background(), src, out, Options{Verify: true, Progress: func(s string) { lines = append(lines, s) }})
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || len(lines) == 0 {
		t.Errorf("verified %v, progress %q", res.Verified, lines)
	}
	entries, _ := os.ReadDir(out)
	if len(entries) != 1 || entries[0].Name() != filepath.Base(res.Archive) {
		t.Fatalf("the backup dir holds %v, want only the archive", entries)
	}
	if fi, _ := os.Stat(res.Archive); fi.Mode().Perm() != 0o600 {
		t.Errorf("archive mode %v, want 0600", fi.Mode().Perm())
	}
	m, err := Verify(context.Background(), res.Archive, true)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Note, "secrets") {
		t.Errorf("manifest note %q does not say it holds secrets", m.Note)
	}
	skippedLink := false
	for _, s := range m.Skipped {
		skippedLink = skippedLink || s.Path == "groups/family/link"
	}
	if !skippedLink {
		t.Errorf("the planted link was not left out: %+v", m.Skipped)
	}

	dst := fresh(t)
	plan, _, err := Plan(context.Background(), res.Archive, dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(context.Background(), res.Archive, dst, plan); err != nil {
		t.Fatal(err)
	}
	if n := count(t, dst.Layout.DB()); n < 101 {
		t.Errorf("restored database has %d rows, want at least the 101 committed before the backup", n)
	}
	for _, pair := range [][2]string{
		{src.Layout.GroupMemory("family"), dst.Layout.GroupMemory("family")},
		{filepath.Join(src.Layout.Session("family"), "home", "s.jsonl"), filepath.Join(dst.Layout.Session("family"), "home", "s.jsonl")},
		{src.EnvFile, dst.EnvFile}, // absent in dst: written in place
	} {
		a, _ := os.ReadFile(pair[0])
		b, err := os.ReadFile(pair[1])
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s restored as %q (%v), want %q", pair[1], b, err, a)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst.Layout.Group("family"), "link")); err == nil {
		t.Error("the link was restored")
	}
}

// The install's own config and env file are never overwritten: a
// different archived one goes beside it as .restored, the same one is
// left alone.
func TestRestoreKeepsConfigAndEnv(t *testing.T) {
	src := install(t)
	res, err := Create(context.Background(), src, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dst := fresh(t)
	write(t, dst.ConfigFile, `{"assistantName": "Bob"}`)
	write(t, dst.EnvFile, "ANTHROPIC_API_KEY=sk-secret\n") // the same
	plan, _, err := Plan(context.Background(), res.Archive, dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(context.Background(), res.Archive, dst, plan); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(dst.ConfigFile); string(b) != `{"assistantName": "Bob"}` {
		t.Errorf("config overwritten: %s", b)
	}
	if b, _ := os.ReadFile(dst.ConfigFile + RestoredSuffix); string(b) != `{"assistantName": "Andy"}` {
		t.Errorf("archived config not beside it: %q", b)
	}
	if _, err := os.Stat(dst.EnvFile + RestoredSuffix); err == nil {
		t.Error("an identical env file was written beside")
	}
}

// Archives that must not be restored are refused before anything is
// written, with one line naming the archive and the problem.
func TestCorruptArchivesRefused(t *testing.T) {
	src := install(t)
	res, err := Create(context.Background(), src, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(res.Archive)
	crafted := func(hdrs ...*tar.Header) []byte {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		for _, h := range hdrs {
			tw.WriteHeader(h)
			if h.Typeflag == tar.TypeReg {
				tw.Write(make([]byte, h.Size))
			}
		}
		tw.Close()
		gz.Close()
		return buf.Bytes()
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0xff
	cases := map[string][]byte{
		"truncated":    good[:len(good)/2],
		"flipped byte": flipped,
		"not gzip":     []byte("hello"),
		"dot-dot":      crafted(&tar.Header{Name: "groups/../../evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600}),
		"absolute":     crafted(&tar.Header{Name: "/etc/evil", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600}),
		"symlink":      crafted(&tar.Header{Name: "groups/family/x", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}),
		"unknown part": crafted(&tar.Header{Name: "elsewhere/x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600}),
		"no manifest":  crafted(&tar.Header{Name: "groups/family/x", Typeflag: tar.TypeReg, Size: 1, Mode: 0o600}),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "a.tar.gz")
			write(t, p, string(body))
			dst := fresh(t)
			_, _, err := Plan(context.Background(), p, dst)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Plan = %v, want ErrCorrupt", err)
			}
			if msg := err.Error(); !strings.Contains(msg, p) || strings.Contains(msg, "\n") {
				t.Errorf("error %q should be one line naming the archive", msg)
			}
			if _, err := os.Stat(dst.Layout.DataDir); err == nil {
				t.Error("something was written")
			}
		})
	}
}

func TestPruneKeepsNewest(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"nanoclawd-20260101T000000Z.tar.gz", "nanoclawd-20260102T000000Z.tar.gz", "nanoclawd-20260103T000000Z.tar.gz", "other.tar.gz"} {
		write(t, filepath.Join(dir, n), "x")
	}
	pruned, err := Prune(dir, 2)
	if err != nil || len(pruned) != 1 || filepath.Base(pruned[0]) != "nanoclawd-20260101T000000Z.tar.gz" {
		t.Fatalf("pruned %v, %v", pruned, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other.tar.gz")); err != nil {
		t.Error("a file not named like an archive was deleted")
	}
}

// A link already in the target tree (an agent planted it in its folder
// before the restore) is replaced by the restored file, never written
// through.
func TestRestoreReplacesLinksInTarget(t *testing.T) {
	src := install(t)
	res, err := Create(context.Background(), src, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	dst := fresh(t)
	outside := filepath.Join(t.TempDir(), "victim")
	write(t, outside, "untouched")
	write(t, dst.Layout.GroupMemory("family")+".x", "")
	if err := os.Symlink(outside, dst.Layout.GroupMemory("family")); err != nil {
		t.Fatal(err)
	}
	plan, _, err := Plan(context.Background(), res.Archive, dst)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(context.Background(), res.Archive, dst, plan); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "untouched" {
		t.Errorf("restore wrote through a link: %q", b)
	}
	fi, err := os.Lstat(dst.Layout.GroupMemory("family"))
	if err != nil || !fi.Mode().IsRegular() {
		t.Errorf("CLAUDE.md is %v (%v), want the restored regular file", fi.Mode(), err)
	}
}

// The Claude CLI keeps a session's transcript under a name made of its
// working directory's path: the main group's in the owner's Claude config
// dir, a confined group's in its session directory. Restored into another
// place (a new machine, a new HOME), both are where the runs there look.
func TestTranscriptsFollowTheirFolders(t *testing.T) {
	src := install(t)
	const transcript = `{"type":"user","sessionId":"s-1"}`
	write(t, filepath.Join(src.mainProject("main"), "s-1.jsonl"), transcript)
	write(t, filepath.Join(src.mainProject("main"), "memory", "MEMORY.md"), "# remembered")
	familyProject := layout.ClaudeProject(filepath.Join(src.Layout.Session("family"), layout.SessionClaudeDir), src.Layout.Group("family"))
	write(t, filepath.Join(familyProject, "s-2.jsonl"), transcript)
	res, err := Create(context.Background(), src, t.TempDir(), Options{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	dst := fresh(t)
	plan, m, err := Plan(context.Background(), res.Archive, dst)
	if err != nil {
		t.Fatal(err)
	}
	if m.Source.MainFolder != "main" || m.Source.MainSessions != src.mainProject("main") {
		t.Errorf("manifest source %+v, want the main folder and where its transcripts were", m.Source)
	}
	if err := Apply(context.Background(), res.Archive, dst, plan); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		filepath.Join(dst.mainProject("main"), "s-1.jsonl"),
		filepath.Join(dst.mainProject("main"), "memory", "MEMORY.md"),
		filepath.Join(layout.ClaudeProject(filepath.Join(dst.Layout.Session("family"), layout.SessionClaudeDir), dst.Layout.Group("family")), "s-2.jsonl"),
	} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("not restored where the runs look: %v", err)
		}
	}
	if strings.HasPrefix(dst.mainProject("main"), dst.Layout.DataDir) || !strings.HasPrefix(dst.mainProject("main"), dst.ClaudeDir) {
		t.Errorf("main's transcripts went to %s, not into the Claude config dir %s", dst.mainProject("main"), dst.ClaudeDir)
	}
}
