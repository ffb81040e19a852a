package ipc

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

// pngHead is the start of a PNG file: enough for content sniffing.
var pngHead = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

const canary = "CANARY-of-the-work-group-7f3a"

// folders makes a groups dir with family's folder (holding a few files)
// and work's (holding a canary), and a daemon dir to copy into.
func folders(t *testing.T) (family, work, out string) {
	t.Helper()
	groups := t.TempDir()
	family, work, out = filepath.Join(groups, "family"), filepath.Join(groups, "work"), filepath.Join(t.TempDir(), "outgoing")
	for path, data := range map[string][]byte{
		filepath.Join(family, "report.pdf"):        []byte("%PDF-1.4 the report"),
		filepath.Join(family, "media", "cat.png"):  append(pngHead, "cat"...),
		filepath.Join(family, "fake.png"):          []byte("not an image at all"),
		filepath.Join(family, "notes.txt"):         []byte("plain notes"),
		filepath.Join(work, "secret.txt"):          []byte(canary),
		filepath.Join(family, "sub", "inner.json"): []byte(`{"a":1}`),
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return family, work, out
}

// A file inside the group's folder is copied into the daemon's dir and
// named and typed; its type comes from its content when that is an image.
func TestStageFileInsideTheFolder(t *testing.T) {
	family, _, out := folders(t)
	if err := os.Symlink("report.pdf", filepath.Join(family, "link.pdf")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, name, mime, content string
	}{
		{"report.pdf", "report.pdf", "application/pdf", "%PDF-1.4 the report"},
		{filepath.Join(family, "media", "cat.png"), "cat.png", "image/png", string(pngHead) + "cat"},
		{"sub/../notes.txt", "notes.txt", "text/plain; charset=utf-8", "plain notes"},
		{"./sub/inner.json", "inner.json", "application/json", `{"a":1}`},
		{"fake.png", "fake.png", "text/plain; charset=utf-8", "not an image at all"},
		{"link.pdf", "link.pdf", "application/pdf", "%PDF-1.4 the report"}, // a link that stays inside
	} {
		att, r, err := stageFile(family, tc.file, out, RunView{})
		if err != nil || r != nil {
			t.Errorf("%s: refused (%v) or failed (%v)", tc.file, r, err)
			continue
		}
		got, _ := os.ReadFile(att.Path)
		if att.Name != tc.name || att.MIME != tc.mime || string(got) != tc.content || filepath.Dir(att.Path) != out {
			t.Errorf("%s: staged %+v holding %q; want name %s, type %s, content %q, in %s", tc.file, att, got, tc.name, tc.mime, tc.content, out)
		}
		if fi, err := os.Stat(att.Path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: copy mode %v (%v), want 0600", tc.file, fi.Mode(), err)
		}
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("copies dir mode %v (%v), want 0700", fi.Mode(), err)
	}
}

// What lies outside the folder is refused as a filesystem violation to
// alert, whether named by `..`, an absolute path or a symlink; what is not
// a regular file, missing or too big is refused without an alert. Nothing
// is copied for any of them.
func TestStageFileRefusals(t *testing.T) {
	family, work, out := folders(t)
	for name, target := range map[string]string{
		"out.txt":   filepath.Join(work, "secret.txt"),
		"outdir":    work,
		"rel.txt":   "../work/secret.txt",
		"passwd":    "/etc/passwd",
		"loop":      "loop",
		"dangling":  "nowhere",
		"inner-abs": filepath.Join(family, "report.pdf"), // absolute, even inside: the root cannot follow it
	} {
		if err := os.Symlink(target, filepath.Join(family, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(family, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(family, "big.bin")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxAttachment+1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(family, "max.bin"), bytes.Repeat([]byte{'x'}, MaxAttachment), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file   string
		alert  bool
		reason string
	}{
		{"../work/secret.txt", true, "outside"},
		{"sub/../../work/secret.txt", true, "outside"},
		{filepath.Join(work, "secret.txt"), true, "outside"},
		{"/etc/passwd", true, "outside"},
		{family + "/../work/secret.txt", true, "outside"},
		{"out.txt", true, "outside"},
		{"outdir/secret.txt", true, "outside"},
		{"rel.txt", true, "outside"},
		{"passwd", true, "outside"},
		{"inner-abs", true, "outside"},
		{"fifo", false, "not a regular file (FIFO)"},
		{"sub", false, "not a regular file (directory)"},
		{".", false, "not a regular file (directory)"},
		{"big.bin", false, "over the 16 MiB limit"},
		{"missing.txt", false, "no file"},
		{"dangling", false, "no file"},
		{"loop", false, "cannot be opened"},
	} {
		att, r, err := stageFile(family, tc.file, out, RunView{})
		if err != nil {
			t.Errorf("%s: error %v, want a refusal", tc.file, err)
			continue
		}
		if r == nil {
			t.Errorf("%s: accepted as %+v", tc.file, att)
			continue
		}
		wantKind := security.Kind("")
		if tc.alert {
			wantKind = security.KindFilesystem
		}
		if r.Alert != tc.alert || r.Kind != wantKind || !strings.Contains(r.Reason, tc.reason) || r.Target != tc.file {
			t.Errorf("%s: refusal %+v; want alert %v, kind %q, reason containing %q", tc.file, r, tc.alert, wantKind, tc.reason)
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("refused files left copies: %v", entries)
	}
	if _, r, err := stageFile(family, "max.bin", out, RunView{}); r != nil || err != nil {
		t.Errorf("a file of exactly %d bytes: %v %v, want it accepted", MaxAttachment, r, err)
	}
}

// The copy is made when the request is decided: an agent that then
// rewrites the file, or swaps it for a symlink to another group's, changes
// nothing that is sent.
func TestStagedCopyIsImmuneToLaterChanges(t *testing.T) {
	family, work, out := folders(t)
	path := filepath.Join(family, "notes.txt")
	att, r, err := stageFile(family, "notes.txt", out, RunView{})
	if err != nil || r != nil {
		t.Fatal(r, err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(work, "secret.txt"), path); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(att.Path); string(got) != "plain notes" {
		t.Errorf("the copy holds %q after the swap, want the bytes checked", got)
	}
	// And asking again now is refused: the swapped name leads out.
	if _, r, _ := stageFile(family, "notes.txt", out, RunView{}); r == nil || !r.Alert {
		t.Errorf("the swapped file: refusal %+v, want an alerted one", r)
	}
}

// A file that grows past the cap between the size check and the copy is
// refused by the copy itself, which keeps nothing.
func TestCopyIntoStopsAtTheCap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "outgoing")
	zeros := io.LimitReader(neverEnding{}, MaxAttachment+1)
	if path, _, over, err := copyInto(dir, zeros); err != nil || !over || path != "" {
		t.Fatalf("copyInto of %d bytes = %q, over %v, %v; want over and nothing kept", MaxAttachment+1, path, over, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %v behind", entries)
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) { clear(p); return len(p), nil }
