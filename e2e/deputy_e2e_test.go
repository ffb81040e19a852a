package e2e_test

// The daemon is nobody's deputy: what it reads, runs or sends for a
// confined group reaches no further than the group's own run could,
// attacked by the hostile agent (no SDK in between) against the real
// daemon, with canaries that must never leave: not in a chat, not in a
// file sent, not in the daemon's outgoing copies, not in the agent's own
// transcript (its reply).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// newCanary is a secret no test output holds by chance.
func newCanary(t *testing.T) string {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	return "CANARY-" + hex.EncodeToString(b[:])
}

// hostileInstall is an install whose agent is the hostile one, with env
// passed to it (names in agent.env) and hostSecurity members security.
func hostileInstall(t *testing.T, dir, security string, env ...string) *ipcInstall {
	t.Helper()
	var names []string
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		names = append(names, e2e.Quote(name))
	}
	in := e2e.New(t, e2e.Options{
		Dir:      dir,
		Agent:    `"command": [` + e2e.Quote(e2e.Bin(t, "internal/testkit/hostileagent")) + `], "env": [` + strings.Join(names, ", ") + `]`,
		Env:      env,
		Security: security,
	})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	return &ipcInstall{Install: in}
}

// plant writes data at rel in dir with mode, making its directories.
func plant(t *testing.T, dir, rel, data string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// neverLeaves fails t if canary is in any message sent, any file sent, or
// any copy the daemon holds in outgoing/.
func (h *ipcInstall) neverLeaves(t *testing.T, canary string) {
	t.Helper()
	for _, m := range h.AllSent() {
		data := m.Text
		if m.File != "" {
			f, err := h.Local.File(context.Background(), m.Seq)
			if err != nil {
				t.Fatal(err)
			}
			data += string(f)
		}
		if strings.Contains(data, canary) {
			t.Errorf("message %d to %s carries the canary: %.300q", m.Seq, m.ChatJID, data)
		}
	}
	out := h.Layout().Outgoing()
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if b, _ := os.ReadFile(filepath.Join(out, e.Name())); strings.Contains(string(b), canary) {
			t.Errorf("the daemon copied the canary to %s", filepath.Join(out, e.Name()))
		}
	}
}

// send_message's file, from a confined run, is read only as the run could:
// the protected names (root's, 0600), a file denyRead hides inside the
// group's folder, the owner's own 0600 file (hard-linked in), and a link inside the folder
// to the hidden file are refused as filesystem violations and never sent;
// the agent cannot read them at the OS level either. A plain file of the
// group's is sent, so the path works.
func TestConfinedGroupSendsOnlyWhatItsRunCouldRead(t *testing.T) {
	dir := t.TempDir()
	canary := newCanary(t)
	bad := []string{".mcp.json", ".envrc", "app/.env", "link.txt"}
	if os.Geteuid() == 0 {
		bad = append(bad, "owners.txt") // the run is another user only when the daemon is root
	}
	h := hostileInstall(t, dir, `"denyRead": ["**/.env"]`,
		"HOSTILE_SEND="+strings.Join(append(bad, "open.txt"), "\n"),
		"HOSTILE_READ="+strings.Join(bad, "\n"))
	folder := filepath.Join(dir, "groups", "family")
	plant(t, folder, ".mcp.json", `{"mcpServers":{},"x":"`+canary+`"}`, 0o600)
	plant(t, folder, ".envrc", "export TOKEN="+canary, 0o600)
	plant(t, folder, "app/.env", "TOKEN="+canary, 0o644)
	// The owner's own file, linked into the folder: the daemon gives a
	// file with other links to nobody, so it stays root's 0600.
	plant(t, dir, "owners-secret", canary, 0o600)
	os.MkdirAll(folder, 0o755)
	if err := os.Link(filepath.Join(dir, "owners-secret"), filepath.Join(folder, "owners.txt")); err != nil {
		t.Fatal(err)
	}
	plant(t, folder, "open.txt", "fine to send", 0o644)
	if err := os.Symlink("app/.env", filepath.Join(folder, "link.txt")); err != nil {
		t.Fatal(err)
	}
	h.Start()
	h.Post("local:family", "Eve", "go")
	reply := h.WaitFor("local:family", func(s string) bool { return strings.HasPrefix(s, "SELF ") })
	transcript := strings.Join(e2e.InChat(reply, "local:family"), "\n")
	t.Logf("what the confined agent got:\n%.3000s", transcript)
	sent := h.WaitFor("local:family", e2e.Equals("sending open.txt"))
	if m := sent[len(sent)-1]; m.File != "open.txt" {
		t.Errorf("the group's own file was not sent: %+v", m)
	}
	for _, f := range bad {
		e := h.waitAudit("family", func(e auditEntry) bool { return e.Target == f && e.Tool == "ipc" })
		if e.Kind != "filesystem" || e.Action != "blocked" {
			t.Errorf("sending %s: audited as %+v, want a blocked filesystem violation", f, e)
		}
		h.WaitFor("local:main", func(s string) bool {
			return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, `group "family"`) && strings.Contains(s, f)
		})
		if !strings.Contains(transcript, "READ "+f+": refused") {
			t.Errorf("the run read %s at the OS level", f)
		}
		h.neverSent("sending " + f)
	}
	h.neverLeaves(t, canary)
}

// A group pads its own folder past the old walk's budget (20,001 entries,
// before its secrets in name order) to make the next run skip the
// cut-outs there: the next run still cannot read the .env denyRead hides,
// nor write into the owner's nested repository.
func TestPaddedFolderKeepsItsCutOuts(t *testing.T) {
	dir := t.TempDir()
	canary := newCanary(t)
	h := hostileInstall(t, dir, `"denyRead": ["**/.env"]`,
		"HOSTILE_PAD=20001", "HOSTILE_READ=zz/.env", "HOSTILE_WRITE=zz/repo/.git/config")
	folder := filepath.Join(dir, "groups", "family")
	plant(t, folder, "zz/.env", "TOKEN="+canary, 0o644)
	plant(t, folder, "zz/repo/.git/config", "[core]\n\tbare = false\n", 0o644)
	h.Start()
	for i, prompt := range []string{"pad", "read"} {
		h.Post("local:family", "Eve", prompt)
		got := h.WaitNext("local:family", func(s string) bool { return strings.HasPrefix(s, "SELF ") }).Text
		if !strings.Contains(got, "PAD 20001 of 20001") {
			t.Fatalf("run %d did not pad its folder:\n%.2000s", i+1, got)
		}
		if !strings.Contains(got, "READ zz/.env: refused") || !strings.Contains(got, "WRITE zz/repo/.git/config: refused") {
			t.Errorf("run %d reached past a cut-out:\n%.2000s", i+1, got)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(folder, "zz/repo/.git/config")); strings.Contains(string(b), "confined agent") {
		t.Errorf("the nested repository's config was written: %q", b)
	}
	h.neverLeaves(t, canary)
}
