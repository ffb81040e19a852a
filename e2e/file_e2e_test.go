package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// End-to-end proof of send_message's file: an agent sends a file of its
// own folder and the chat (the local channel) shows it, byte for byte; an
// agent that asks for /etc/passwd, another group's file through `..`, or
// through a symlink is refused, audited as a filesystem violation and
// alerted to main, and none of those bytes is sent anywhere.
func TestIPCSendFile(t *testing.T) {
	h := newIPCInstall(t, "0s")
	h.threeGroups()
	l := h.Layout()
	var b [8]byte
	rand.Read(b[:])
	canary := "CANARY-" + hex.EncodeToString(b[:])
	secret := filepath.Join(l.Group("work"), "secret.txt")
	if err := os.MkdirAll(filepath.Dir(secret), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte(canary), 0o600); err != nil {
		t.Fatal(err)
	}
	h.Start()
	ctx := context.Background()

	t.Run("own file", func(t *testing.T) {
		h.sub(t)
		text := h.unique("report")
		h.Post("local:family", "Owner", "@Andy send-file out/report.txt "+text)
		all := h.WaitFor("local:family", e2e.Equals("ipc "+text))
		m := all[len(all)-1]
		want := "file out/report.txt of family"
		if m.File != "report.txt" || m.FileType != "text/plain; charset=utf-8" || m.FileBytes != int64(len(want)) {
			t.Errorf("/sent shows file %q, type %q, %d bytes; want report.txt, text/plain, %d bytes", m.File, m.FileType, m.FileBytes, len(want))
		}
		if data, err := h.Local.File(ctx, m.Seq); err != nil || string(data) != want {
			t.Errorf("the file sent holds %q (%v), want %q", data, err, want)
		}
		h.WaitFor("local:family", e2e.Equals("queued "+text))
		// Sent, the daemon's copy goes.
		deadline := time.Now().Add(20 * time.Second)
		for entries, _ := os.ReadDir(l.Outgoing()); len(entries) > 0; entries, _ = os.ReadDir(l.Outgoing()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still holds %v after the file was sent", l.Outgoing(), entries)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("outside the folder", func(t *testing.T) {
		h.sub(t)
		for _, tc := range []struct{ cmd, target string }{
			{"ipc-file /etc/passwd", "/etc/passwd"},
			{"ipc-file ../work/secret.txt", "../work/secret.txt"},
			{"link-file " + secret + " peek.txt", "peek.txt"},
		} {
			text := h.unique("steal")
			h.Post("local:family", "Owner", "@Andy "+tc.cmd+" "+text)
			e := h.waitAudit("family", func(e auditEntry) bool { return strings.Contains(e.Detail, text) })
			if e.Kind != "filesystem" || e.Tool != "ipc" || e.Target != tc.target || !strings.Contains(e.Detail, "outside the group's folder") {
				t.Errorf("%s: audited as %+v; want a filesystem violation of %s outside the folder", tc.cmd, e, tc.target)
			}
			all := h.WaitFor("local:main", func(s string) bool {
				return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, `group "family"`) && strings.Contains(s, tc.target)
			})
			if alert := all[len(all)-1].Text; !strings.Contains(alert, "file access") {
				t.Errorf("%s: alert %q does not say it was file access", tc.cmd, alert)
			}
			h.WaitFor("local:family", e2e.Equals("queued "+text))
			h.neverSent("ipc " + text)
		}
		// Nothing of the targets went anywhere: not in a text, not in a file.
		for _, m := range h.AllSent() {
			data := []byte(m.Text)
			if m.File != "" {
				f, err := h.Local.File(ctx, m.Seq)
				if err != nil {
					t.Fatal(err)
				}
				data = append(data, f...)
			}
			if s := string(data); strings.Contains(s, canary) || strings.Contains(s, "root:") {
				t.Errorf("message %d to %s leaks a target: %q", m.Seq, m.ChatJID, s)
			}
		}
		entries, _ := os.ReadDir(l.Outgoing())
		for _, e := range entries {
			if data, _ := os.ReadFile(filepath.Join(l.Outgoing(), e.Name())); strings.Contains(string(data), canary) {
				t.Errorf("the canary was copied to %s", e.Name())
			}
		}
	})
}
