package router

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/sandbox"
)

// A confined group's voice note is transcribed from the daemon's own copy,
// by a transcriber that runs as the runs' user in a sandbox: the group
// swaps its saved note for a link to a secret while the transcriber is
// starting, and the transcriber tries to read the secret itself; the
// transcript holds the note's own bytes, never the secret.
func TestTranscriberReadsOnlyTheNoteItWasGiven(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux (bubblewrap): macOS does not confine a transcriber (docs/security.md)")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap is not installed (apt-get install bubblewrap)")
	}
	e := newEnv(t)
	e.cfg.Agent.RunAs = config.RunAs{UID: sandbox.DefaultRunID, GID: sandbox.DefaultRunID}
	// As the daemon makes its dirs: passable for the runs' user.
	top := filepath.Dir(e.cfg.DataDir)
	os.Chmod(top, 0o711)
	os.Chmod(filepath.Dir(top), 0o711)
	if err := sandbox.Shield(e.cfg.Layout(), e.cfg.Agent.RunAs.User()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o711)
	os.Chmod(dir, 0o755)
	// The secret lies beside nothing the transcriber is given, readable
	// by anyone who can reach it: only the sandbox keeps it out.
	other := t.TempDir()
	os.Chmod(filepath.Dir(other), 0o711)
	os.Chmod(other, 0o755)
	secret := filepath.Join(other, "secret")
	canary := "CANARY-transcribe-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := os.WriteFile(secret, []byte(canary), 0o644); err != nil {
		t.Fatal(err)
	}
	release := filepath.Join(dir, "go")
	tr := filepath.Join(dir, "tr")
	script := "#!/bin/sh\nwhile [ ! -e " + release + " ]; do sleep 0.01; done\necho uid=$(id -u)\ncat \"$1\"\necho\ncat " + secret + " " +
		filepath.Join(e.cfg.GroupsDir, "main", "notes.md") + " 2>&1\nexit 0\n"
	if err := os.WriteFile(tr, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(e.cfg.GroupsDir, "main"), 0o755)
	os.WriteFile(filepath.Join(e.cfg.GroupsDir, "main", "notes.md"), []byte(canary), 0o644)
	e.cfg.Media = config.Media{MaxBytes: 1 << 20, Transcribe: config.Transcribe{Command: []string{tr, "{file}"}, Timeout: config.Duration(time.Minute)}}
	ctx := context.Background()
	if err := e.r.OnMessage(ctx, channel.Message{ChatJID: famJID, ID: "V9", SenderJID: "+49170", Time: time.Now(),
		Media: file(channel.MediaVoice, "audio/ogg", "", 16, 3, []byte("OggS-the-note-itself"), nil)}); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(e.cfg.GroupsDir, "family", "media", "V9.ogg")
	if err := os.Remove(saved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, saved); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(release, nil, 0o644)
	if err := e.r.Media.Wait(ctx, famJID, nil); err != nil {
		t.Fatal(err)
	}
	msgs, _ := e.msgs.Unanswered(ctx, famJID)
	if len(msgs) != 1 {
		t.Fatalf("stored: %+v", msgs)
	}
	got := msgs[0].Media
	t.Logf("stored: %s", got)
	if !strings.Contains(got, "transcript: ") || !strings.Contains(got, "OggS-the-note-itself") || strings.Contains(got, canary) {
		t.Errorf("the transcript is %q: want the note's own bytes and never the canary", got)
	}
	if u := sandbox.RunUser(sandbox.User{UID: sandbox.DefaultRunID, GID: sandbox.DefaultRunID}); !strings.Contains(got, "uid="+strconv.Itoa(u.UID)) {
		t.Errorf("the transcriber did not run as the runs' user %d: %q", u.UID, got)
	}
	entries, _ := os.ReadDir(e.cfg.Layout().Transcribing())
	if len(entries) != 0 {
		t.Errorf("the copy was left behind: %v", entries)
	}
}
