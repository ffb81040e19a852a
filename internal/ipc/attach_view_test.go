package ipc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// A confined group sends only what its run could read: a protected name,
// a path denyRead cuts out (directly or through a link inside the
// folder) and, with the daemon as root, a file the run's user may not
// open are refused as filesystem violations; nothing is copied for them.
func TestStageFileOnlyWhatTheRunCouldRead(t *testing.T) {
	family, _, out := folders(t)
	u := sandbox.RunUser(sandbox.User{UID: sandbox.DefaultRunID, GID: sandbox.DefaultRunID})
	write := func(rel, data string, mode os.FileMode) {
		p := filepath.Join(family, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(".mcp.json", canary, 0o644)
	write(".envrc", canary, 0o644)
	write("sub/.git/config", canary, 0o644)
	write("app/.env", canary, 0o644)
	write("keys/owner.pem", canary, 0o644)
	write("open.txt", "for everyone", 0o644)
	os.Chmod(family, 0o755)
	if err := os.Symlink("app/.env", filepath.Join(family, "innocent.txt")); err != nil {
		t.Fatal(err)
	}
	view := RunView{Confined: true, User: u, DenyRead: []string{"**/.env", filepath.Join(family, "keys")}}
	cases := []struct{ file, why string }{
		{".mcp.json", "protected"}, {".envrc", "protected"}, {"sub/.git/config", "protected"},
		{"app/.env", "denyRead"}, {"keys/owner.pem", "denyRead"}, {"innocent.txt", "denyRead"},
	}
	if u.Switches() {
		write("owners.txt", canary, 0o600) // the owner's (root's), not the run's
		cases = append(cases, struct{ file, why string }{"owners.txt", "may not be read by the group's runs"})
	}
	for _, tc := range cases {
		att, r, err := stageFile(family, tc.file, out, view)
		if err != nil || r == nil {
			t.Errorf("%s: not refused (staged %+v, %v)", tc.file, att, err)
			continue
		}
		if !r.Alert || r.Kind != security.KindFilesystem || !strings.Contains(r.Reason, tc.why) {
			t.Errorf("%s: refusal %+v, want a filesystem violation saying %q", tc.file, r, tc.why)
		}
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if b, _ := os.ReadFile(filepath.Join(out, e.Name())); strings.Contains(string(b), canary) {
			t.Errorf("the canary was copied to %s", e.Name())
		}
	}
	// What the run can read still goes.
	if att, r, err := stageFile(family, "open.txt", out, view); r != nil || err != nil {
		t.Errorf("open.txt: refused (%+v) or failed (%v)", r, err)
	} else if b, _ := os.ReadFile(att.Path); string(b) != "for everyone" {
		t.Errorf("open.txt: staged %q", b)
	}
}
