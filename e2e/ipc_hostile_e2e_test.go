package e2e_test

// The hostile rows: every kind of bad IPC file against the real daemon, each
// refused, quarantined, audited and (where it matters) alerted, while the
// daemon keeps answering.

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/groupfs"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/groupfstest"
)

func TestIPCHostileFiles(t *testing.T) {
	h := newIPCInstall(t, "0s")
	h.threeGroups()
	h.Start()
	famTok := h.token("local:family", "family")
	workTok := h.token("local:work", "work")
	mainTok := h.token("local:main", "main")
	forged := make([]byte, 32)
	rand.Read(forged)

	// message is a message file from family whose text is a marker that
	// must never be sent.
	message := func(chat, marker, token string) []byte {
		return ipcFile("type", "message", "chatJid", chat, "text", marker, "token", token)
	}
	for _, tc := range []struct {
		name   string
		folder string // the directory it is dropped in
		sub    string
		body   []byte
		reason string
		group  string // who the audit and alert name
		alert  bool
		marker string
	}{
		{name: "bad JSON", folder: "family", sub: "messages", body: []byte(`{"type":"message","chatJid":"local:family","text":"never-badjson",`),
			reason: "bad JSON", group: "family", marker: "never-badjson"},
		{name: "missing token", folder: "family", sub: "messages", body: ipcFile("type", "message", "chatJid", "local:family", "text", "never-notoken"),
			reason: "missing token", group: "family", alert: true, marker: "never-notoken"},
		{name: "forged token", folder: "family", sub: "messages", body: message("local:family", "never-forged", hex.EncodeToString(forged)),
			reason: "wrong or expired token", group: "family", alert: true, marker: "never-forged"},
		{name: "other group's token", folder: "family", sub: "messages", body: message("local:family", "never-othertoken", workTok),
			reason: "work tried to act as family", group: "work", alert: true, marker: "never-othertoken"},
		{name: "cross-group chatJid", folder: "family", sub: "messages", body: message("local:work", "never-crossgroup", famTok),
			reason: "may only message its own chat", group: "family", alert: true, marker: "never-crossgroup"},
		{name: "non-main register_group", folder: "family", sub: "tasks",
			body:   ipcFile("type", "register_group", "jid", "local:never-evilgrp", "name", "evil", "folder", "evilgrp", "token", famTok),
			reason: "main group only", group: "family", alert: true, marker: "never-evilgrp"},
		{name: "cross-group targetJid", folder: "family", sub: "tasks",
			body: ipcFile("type", "schedule_task", "prompt", "echo never-crosstask", "schedule_type", "once", "schedule_value", "2099-01-01T00:00:00",
				"context_mode", "isolated", "targetJid", "local:work", "token", famTok),
			reason: "may only schedule tasks for itself", group: "family", alert: true, marker: "never-crosstask"},
		{name: "2 MB file", folder: "family", sub: "messages", body: message("local:family", "never-big"+strings.Repeat("x", 2<<20), famTok),
			reason: "over the 1 MiB limit", group: "family", marker: "never-big"},
		{name: "unknown type", folder: "family", sub: "messages", body: ipcFile("type", "wipe_disk", "text", "never-unknown", "token", famTok),
			reason: "unknown type", group: "family", marker: "never-unknown"},
		{name: "message from main in tasks dir", folder: "main", sub: "tasks", body: message("local:family", "never-wrongdir", mainTok),
			reason: "belongs in messages/", group: "main", marker: "never-wrongdir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.sub(t)
			name := h.drop(tc.folder, tc.sub, "hostile", tc.body)
			h.refused(tc.folder, tc.sub, name, tc.group, tc.reason)
			if tc.alert {
				h.alerted(name, tc.group)
			}
			h.stillAnswering(mainTok)
			if !tc.alert {
				h.notAlerted(name)
			}
			h.neverSent(tc.marker)
		})
	}

	t.Run("another group's task", func(t *testing.T) {
		h.sub(t)
		h.drop("work", "tasks", "own", ipcFile("type", "schedule_task", "prompt", "work's own task", "schedule_type", "once",
			"schedule_value", "2099-01-01T00:00:00", "context_mode", "isolated", "token", workTok))
		task := h.waitTask("work", "work's own task")
		for _, body := range [][]byte{
			ipcFile("type", "cancel_task", "taskId", task.ID, "token", famTok),
			ipcFile("type", "pause_task", "taskId", task.ID, "token", famTok),
			ipcFile("type", "update_task", "taskId", task.ID, "prompt", "echo hijacked", "token", famTok),
		} {
			name := h.drop("family", "tasks", "steal", body)
			h.refused("family", "tasks", name, "family", "may only change its own tasks")
			h.alerted(name, "family")
		}
		h.stillAnswering(mainTok)
		if got := h.waitTask("work", "work's own task"); got.Status != task.Status || got.Prompt != task.Prompt {
			t.Errorf("work's task changed: %+v, was %+v", got, task)
		}
		if data, _ := os.ReadFile(filepath.Join(h.ipcDir("family", ""), "current_tasks.json")); bytes.Contains(data, []byte(task.ID)) {
			t.Errorf("family's current_tasks.json shows work's task: %s", data)
		}
	})
	t.Run("symlink", func(t *testing.T) {
		h.sub(t)
		// The link points at a valid file of family's holding a secret:
		// followed, it would be sent.
		secretFile := filepath.Join(t.TempDir(), "secret.json")
		secret := message("local:family", "SECRET-"+hex.EncodeToString(forged[:8]), famTok)
		os.WriteFile(secretFile, secret, 0o600)
		name := fmt.Sprintf("%d-link.json", time.Now().UnixNano())
		tmp := filepath.Join(h.ipcDir("family", "messages"), name+".tmp")
		if err := os.Symlink(secretFile, tmp); err != nil {
			t.Fatal(err)
		}
		os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp"))
		h.refused("family", "messages", name, "family", "not a regular file (symlink)")
		h.stillAnswering(mainTok)
		h.neverSent("SECRET-")
		h.notAlerted(name)
		if got, _ := os.ReadFile(secretFile); !bytes.Equal(got, secret) {
			t.Errorf("the link's target changed: %q", got)
		}
		links, _ := filepath.Glob(filepath.Join(h.Dir, "data", "ipc", "errors", "family.messages.*."+name))
		if fi, err := os.Lstat(links[0]); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("quarantined as %v (%v), want the link itself", fi.Mode(), err)
		}
	})
	t.Run("FIFO", func(t *testing.T) {
		h.sub(t)
		// Opening a FIFO for reading blocks until a writer comes: the
		// watcher must not open it.
		name := fmt.Sprintf("%d-fifo.json", time.Now().UnixNano())
		tmp := filepath.Join(h.ipcDir("family", "messages"), name+".tmp")
		if err := syscall.Mkfifo(tmp, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp"))
		h.refused("family", "messages", name, "family", "not a regular file (FIFO)")
		h.stillAnswering(mainTok)
		h.notAlerted(name)
	})
	t.Run("path tricks in folder", func(t *testing.T) {
		h.sub(t)
		outside := filepath.Join(h.Dir, "abs-evil")
		folders := []string{"../evil", "..", "evil/../../evil2", outside, "errors", "global", ".hidden", "main/../evil3"}
		for _, f := range folders {
			body := ipcFile("type", "register_group", "jid", "local:trick", "name", "trick", "folder", f, "token", mainTok)
			name := h.drop("main", "tasks", "trick", body)
			h.refused("main", "tasks", name, "main", "use 1-64 letters")
			h.notAlerted(name) // main's own malformed file: audited, not alerted
		}
		h.stillAnswering(mainTok)
		for _, p := range []string{
			filepath.Join(h.Dir, "evil"), filepath.Join(h.Dir, "evil2"), filepath.Join(h.Dir, "data", "evil"),
			filepath.Join(h.Dir, "data", "ipc", "evil"), outside, filepath.Join(h.Dir, "groups", "errors"),
			filepath.Join(h.Dir, "groups", "global"), filepath.Join(h.Dir, "groups", "evil3"), filepath.Join(h.Dir, "groups", ".hidden"),
		} {
			if _, err := os.Lstat(p); !os.IsNotExist(err) {
				t.Errorf("%s was created (%v)", p, err)
			}
		}
		got := h.groupFolders()
		slices.Sort(got)
		if !slices.Equal(got, []string{"family", "main", "work"}) {
			t.Errorf("groups now %v", got)
		}
	})
	t.Run("messages dir swapped for a link to another group's", func(t *testing.T) {
		h.sub(t)
		// Last of the family rows: family's messages/ stays a link.
		own := h.ipcDir("family", "messages")
		if err := os.Rename(own, own+".old"); err != nil {
			t.Fatal(err)
		}
		// The daemon may put a new messages/ back before the link is made:
		// take that one away too, as an agent would.
		for tries := 0; ; tries++ {
			err := os.Symlink(filepath.Join("..", "work", "messages"), own)
			if err == nil {
				break
			}
			if tries == 100 {
				t.Fatal(err)
			}
			os.Remove(own)
		}
		// The daemon hears its watched directory go: the link is removed,
		// never read through, recorded, and a real messages/ takes its place.
		groupfstest.WaitRealDir(t, own)
		e := h.waitAudit("family", func(e auditEntry) bool { return e.Target == own })
		if e.Kind != "filesystem" || e.Tool != groupfs.Tool || e.Action != "blocked" {
			t.Errorf("the link is audited as %+v; want a blocked filesystem violation of nanoclawd's", e)
		}
		name := h.drop("family", "messages", "afterlink", message("local:family", "after the link", famTok))
		h.WaitFor("local:family", e2e.Equals("after the link"))
		if _, err := os.Lstat(filepath.Join(h.ipcDir("work", "messages"), name)); !os.IsNotExist(err) {
			t.Errorf("family's file went into work's messages/ (%v)", err)
		}
		h.stillAnswering(mainTok)
	})
	t.Run("a refused file's group stays untouched", func(t *testing.T) {
		h.sub(t)
		if slices.Contains(h.groupFolders(), "evilgrp") {
			t.Error("non-main register_group registered a group")
		}
		for _, p := range []string{filepath.Join(h.Dir, "groups", "evilgrp"), h.ipcDir("evilgrp", "")} {
			if _, err := os.Lstat(p); !os.IsNotExist(err) {
				t.Errorf("%s was created (%v)", p, err)
			}
		}
	})
}
