package ipc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// writeIn writes data to rel inside folder's group folder.
func (h *harness) writeIn(t *testing.T, folder, rel, data string) string {
	t.Helper()
	path := filepath.Join(h.layout.Group(folder), rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (h *harness) msgFile(folder, chat, text, file string) map[string]any {
	m := h.msg(folder, chat, text)
	m["file"] = file
	return m
}

// A message with a file of the group's own folder is carried out with the
// daemon's copy; main follows the same rule for its own folder. A file
// outside the folder (by path or symlink) is refused, audited as a
// filesystem violation, alerted and quarantined, and nothing is copied;
// a message without a file is what it always was.
func TestMessageWithFile(t *testing.T) {
	h := newHarness(t)
	h.start(t)
	h.writeIn(t, "family", "out/chart.png", string(pngHead)+"chart")
	h.writeIn(t, "main", "list.txt", "main's list")
	h.writeIn(t, "work", "secret.txt", canary)
	if err := os.Symlink(filepath.Join(h.layout.Group("work"), "secret.txt"), filepath.Join(h.layout.Group("family"), "peek.txt")); err != nil {
		t.Fatal(err)
	}

	h.drop(t, "family", layout.MessagesDir, h.msgFile("family", "family@g.us", "the chart", "out/chart.png"))
	e := h.expectSend(t, "family", "family@g.us", "the chart")
	if e.file == nil || e.file.Name != "chart.png" || e.file.MIME != "image/png" || filepath.Dir(e.file.Path) != h.layout.Outgoing() {
		t.Fatalf("sent file %+v; want chart.png, image/png, copied into %s", e.file, h.layout.Outgoing())
	}
	if got, _ := os.ReadFile(e.file.Path); string(got) != string(pngHead)+"chart" {
		t.Errorf("the copy holds %q", got)
	}

	h.drop(t, "main", layout.MessagesDir, h.msgFile("main", "family@g.us", "from main", filepath.Join(h.layout.Group("main"), "list.txt")))
	if e := h.expectSend(t, "main", "family@g.us", "from main"); e.file == nil || e.file.Name != "list.txt" {
		t.Errorf("main's file %+v", e.file)
	}
	// Main's folder rule is its own folder too, not every group's.
	p := h.drop(t, "main", layout.MessagesDir, h.msgFile("main", "main@g.us", "x", "../work/secret.txt"))
	h.expectFileRefused(t, p, "main", "outside the group's folder")

	for _, file := range []string{"/etc/passwd", "peek.txt", "../work/secret.txt"} {
		p := h.drop(t, "family", layout.MessagesDir, h.msgFile("family", "family@g.us", "look", file))
		h.expectFileRefused(t, p, "family", "outside the group's folder")
	}
	p = h.drop(t, "family", layout.MessagesDir, h.msgFile("family", "family@g.us", "look", "missing.pdf"))
	if e := h.next(t); e.kind != "violation" || e.alert || e.v.Kind != security.KindIPC || !strings.Contains(e.v.Detail, "no file") {
		t.Fatalf("a missing file: %+v alert=%v; want a refusal without alert", e.v, e.alert)
	}

	h.drop(t, "family", layout.MessagesDir, h.msg("family", "family@g.us", "just text"))
	if e := h.expectSend(t, "family", "family@g.us", "just text"); e.file != nil {
		t.Errorf("a message without a file carries %+v", e.file)
	}
	if entries, _ := os.ReadDir(h.layout.Outgoing()); len(entries) != 2 {
		t.Errorf("outgoing holds %d copies, want the 2 accepted files", len(entries))
	}
	for _, entry := range mustReadDir(t, h.layout.Outgoing()) {
		if data, _ := os.ReadFile(filepath.Join(h.layout.Outgoing(), entry.Name())); strings.Contains(string(data), canary) {
			t.Errorf("the work group's canary was copied to %s", entry.Name())
		}
	}
}

func (h *harness) expectFileRefused(t *testing.T, path, group, reason string) {
	t.Helper()
	e := h.next(t)
	if e.kind != "violation" || !e.alert || e.v.Kind != security.KindFilesystem || e.v.Group != group || !strings.Contains(e.v.Detail, reason) {
		t.Fatalf("got %+v alert=%v; want a filesystem violation of %s, alerted, with %q", e.v, e.alert, group, reason)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("%s still in place (%v)", path, err)
	}
	if m, _ := filepath.Glob(filepath.Join(h.root, layout.ErrorsDir, "*"+filepath.Base(path)+".reason")); len(m) != 1 {
		t.Fatalf("no quarantine reason for %s", filepath.Base(path))
	}
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
