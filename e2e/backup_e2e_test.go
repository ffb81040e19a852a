package e2e_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// The acceptance check of backups: with the daemon running and messages
// arriving, `backup --verify` makes one archive; `restore` into a fresh
// directory with the same config gives the same groups, the same memory
// files byte for byte and the same message history; the restored daemon
// answers with the group's session resumed; and no message posted during
// the backup was lost.
func TestBackupRestoreWhileRunning(t *testing.T) {
	in := e2e.New(t, e2e.Options{StopSignal: syscall.SIGTERM})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family")
	memory := "# family\nBirthdays: Ann 3 May.\n\x00binary-ish \xff bytes\n"
	if err := os.WriteFile(in.Layout().GroupMemory("family"), []byte(memory), 0o644); err != nil {
		t.Fatal(err)
	}
	p := in.Start()
	in.Post("local:main", "Owner", "echo start")
	in.WaitFor("local:main", e2e.Equals("echo: start"))
	in.Post("local:main", "Owner", "session")
	all := in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "session: sess-") })
	session := all[len(all)-1].Text

	// Messages arrive in both groups before the backup and keep arriving
	// for the whole of it.
	var posted []string
	for i := range 3 {
		text := fmt.Sprintf("echo before-%d", i)
		in.Post("local:main", "Owner", text)
		in.Post("local:family", "Ann", "@Andy "+text)
		posted = append(posted, text)
	}
	const perChat = 15
	var wg sync.WaitGroup
	backupDone := make(chan struct{})
	var postedMu sync.Mutex
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-backupDone:
				if i >= perChat {
					return
				}
			default:
			}
			text := fmt.Sprintf("echo during-%d", i)
			for chat, body := range map[string]string{"local:main": text, "local:family": "@Andy " + text} {
				// Not in.Post: a test may fail only from its own goroutine.
				if _, err := in.Local.Post(context.Background(), local.Message{ChatJID: chat, Sender: "Ann@local", SenderName: "Ann", Text: body}); err != nil {
					t.Errorf("post %q: %v", body, err)
					return
				}
			}
			postedMu.Lock()
			posted = append(posted, text)
			postedMu.Unlock()
		}
	})
	dir := t.TempDir()
	out, errs, code := e2e.Run(t, "", in.Env, "backup", "--verify", "--to", dir, "--config", in.Config)
	close(backupDone)
	wg.Wait()
	if code != 0 {
		t.Fatalf("backup: exit %d: %s%s", code, out, errs)
	}
	archive := strings.TrimSpace(out)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || filepath.Join(dir, entries[0].Name()) != archive {
		t.Fatalf("backup dir holds %v, want only %s", entries, archive)
	}
	if !strings.Contains(errs, "verified") || !strings.Contains(errs, "secrets") {
		t.Errorf("backup's summary: %q", errs)
	}
	// Nothing posted during the backup was lost: the running daemon stored
	// every message and answered up to the last one in both chats (the
	// stand-in answers a batch by echoing its last message).
	last := "echo: " + strings.TrimPrefix(posted[len(posted)-1], "echo ")
	in.WaitFor("local:main", e2e.Equals(last))
	in.WaitFor("local:family", e2e.Equals(last))
	stored := map[string]int{}
	for _, row := range history(t, in.Layout().DB()) {
		f := strings.SplitN(row, "|", 6)
		stored[f[1]+" "+strings.TrimPrefix(f[5], "@Andy ")]++
	}
	for _, text := range posted {
		for _, chat := range []string{"local:main", "local:family"} {
			if n := stored[chat+" "+text]; n != 1 {
				t.Fatalf("%q is stored %d times in %s, want once", text, n, chat)
			}
		}
	}
	if st := in.CLI("status"); !strings.Contains(st, "last backup: ok") {
		t.Errorf("status does not show the backup:\n%s", st)
	}
	origGroups := in.CLI("groups", "list", "--json")
	p.Stop()

	// A fresh directory, the same config (but for its own socket).
	fresh := e2e.New(t, e2e.Options{StopSignal: syscall.SIGTERM})
	if _, errs, code := e2e.Run(t, "", fresh.Env, "restore", archive, "--dry-run", "--config", fresh.Config); code != 0 {
		t.Fatalf("restore --dry-run: %s", errs)
	}
	if _, err := os.Stat(fresh.Layout().DB()); err == nil {
		t.Fatal("--dry-run wrote the database")
	}
	out = fresh.CLI("restore", archive)
	if !strings.Contains(out, fresh.Config+".restored") {
		t.Errorf("restore does not say the archived config went beside the install's own:\n%s", out)
	}
	if got := fresh.CLI("groups", "list", "--json"); got != origGroups {
		t.Errorf("groups differ:\n%s\nwant\n%s", got, origGroups)
	}
	for _, folder := range []string{"main", "family"} {
		a, _ := os.ReadFile(in.Layout().GroupMemory(folder))
		b, err := os.ReadFile(fresh.Layout().GroupMemory(folder))
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s/CLAUDE.md restored as %q (%v), want %q", folder, b, err, a)
		}
	}
	// The restored history is the original's as it stood at one moment:
	// the same rows in the same order, up to some message, and at least
	// everything before the backup began.
	orig, restored := history(t, in.Layout().DB()), history(t, fresh.Layout().DB())
	if len(restored) < 2+2*3 || len(restored) > len(orig) || !reflect.DeepEqual(restored, orig[:len(restored)]) {
		t.Errorf("restored history (%d messages) is not a prefix of the original's (%d)", len(restored), len(orig))
	}

	fresh.Start()
	base := int64(0)
	if sent := fresh.AllSent(); len(sent) > 0 {
		base = sent[len(sent)-1].Seq // what the original sent, restored with it
	}
	fresh.Post("local:main", "Owner", "session")
	deadline := time.Now().Add(60 * time.Second)
	for got := ""; got != session; {
		if time.Now().After(deadline) {
			t.Fatalf("the restored daemon did not answer %q", session)
		}
		for _, m := range fresh.SentAfter(base, 5*time.Second) {
			base = m.Seq
			if m.ChatJID == "local:main" && strings.HasPrefix(m.Text, "session: ") {
				if got = m.Text; got != session {
					t.Fatalf("restored daemon answered %q, want the resumed %q", got, session)
				}
			}
		}
	}
}

// history is every stored message of an install's database, in order.
func history(t *testing.T, db string) []string {
	t.Helper()
	conn, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT seq, chat_jid, id, sender, text, time FROM messages ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var seq, at int64
		var chat, id, sender, text string
		if err := rows.Scan(&seq, &chat, &id, &sender, &text, &at); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d|%s|%s|%s|%d|%s", seq, chat, id, sender, at, text))
	}
	return out
}

// restore refuses while a daemon runs on the target, and writes nothing.
func TestRestoreRefusedWhileDaemonRuns(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	archive := strings.TrimSpace(in.CLI("backup", "--to", t.TempDir()))
	in.Start()
	out, errs, code := e2e.Run(t, "", in.Env, "restore", archive, "--config", in.Config)
	if code == 0 || !strings.Contains(errs, "restore refused") || !strings.Contains(errs, "another nanoclawd is running") {
		t.Fatalf("restore while running: exit %d\n%s%s", code, out, errs)
	}
	if n := strings.Count(strings.TrimSpace(errs), "\n"); n != 0 {
		t.Errorf("want one line, got:\n%s", errs)
	}
}

// A damaged archive is refused with one clear line, before anything is
// written.
func TestRestoreRefusesCorruptArchive(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	archive := strings.TrimSpace(in.CLI("backup", "--to", t.TempDir()))
	b, _ := os.ReadFile(archive)
	if err := os.WriteFile(archive, b[:len(b)-40], 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := e2e.New(t, e2e.Options{})
	out, errs, code := e2e.Run(t, "", fresh.Env, "restore", archive, "--config", fresh.Config)
	if code == 0 || !strings.Contains(errs, "not a usable nanoclawd backup") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("corrupt archive: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(fresh.Layout().DB()); err == nil {
		t.Error("a corrupt archive wrote the database")
	}
}
