package sdkproof

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// A saved session the claude CLI no longer has (it prunes old transcripts)
// must not lock the group: with the real SDK the run starts fresh once and
// answers the same message. What the CLI says about the missing session is
// whatever the real SDK and CLI say, not a stand-in's imitation.
func TestLostSessionRecoversWithTheRealSDK(t *testing.T) {
	w := newWorld(t) // skips without agent-runner/node_modules or bwrap
	mock := mockapi.New(t)
	mock.Script("SESSION-ONE", mockapi.Text("first answer"))
	mock.Script("SESSION-TWO", mockapi.Text("second answer"))
	in := newDaemonInstall(t, w, mock.URL)
	dumpOnFailure(t, w, mock)
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "SESSION-ONE hello")
	in.WaitNext("local:main", e2e.Equals("first answer"))

	db, err := sql.Open("sqlite3", "file:"+filepath.Join(w.data, "nanoclaw.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	savedSession(t, w.data, "")
	const lost = "3f1c2d4e-0000-4000-8000-00000000dead" // a transcript the CLI never had
	if _, err := db.Exec(`UPDATE sessions SET session_id = ? WHERE folder = 'main'`, lost); err != nil {
		t.Fatal(err)
	}

	in.Post("local:main", "Owner", "SESSION-TWO are you there?")
	m := in.WaitNext("local:main", func(s string) bool { return s == "second answer" || strings.Contains(s, "could not answer") })
	if m.Text != "second answer" {
		t.Fatalf("the lost session failed the group: %q", m.Text)
	}
	savedSession(t, w.data, lost) // the fresh session is kept
}

// The main group's memory survives a backup restored on another machine:
// its transcripts are the CLI's own, in the owner's ~/.claude under a name
// made of the main folder's path. Backed up, restored into a new HOME and
// new data and groups dirs, the next main message resumes that session —
// the real CLI finds the transcript and sends the earlier turns to the
// model (the mock's second scripted turn answers only a conversation that
// began with the first message).
func TestMainSessionResumesAfterRestoreWithTheRealSDK(t *testing.T) {
	w := newWorld(t) // skips without agent-runner/node_modules or bwrap
	mock := mockapi.New(t)
	mock.Script("MEMORY-ONE", mockapi.Text("first answer"), mockapi.Text("resumed answer"))
	dumpOnFailure(t, w, mock)
	in := newDaemonInstall(t, w, mock.URL)
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	in.Post("local:main", "Owner", "MEMORY-ONE the word is PINEAPPLE")
	in.WaitNext("local:main", e2e.Equals("first answer"))
	saved := savedSession(t, w.data, "")
	transcript := func(w *world) string {
		return filepath.Join(layout.ClaudeProject(filepath.Join(w.home, ".claude"), w.groupDir("main")), saved+".jsonl")
	}
	if _, err := os.Stat(transcript(w)); err != nil {
		t.Fatalf("the main group's transcript is not where the backup takes it from: %v", err)
	}
	archive := strings.TrimSpace(in.CLI("backup", "--to", t.TempDir()))
	p.Stop()

	w2 := newWorld(t) // another root: another HOME, data and groups dir
	in2 := newDaemonInstall(t, w2, mock.URL)
	dumpOnFailure(t, w2, mock)
	in2.CLI("restore", archive)
	if _, err := os.Stat(transcript(w2)); err != nil {
		t.Fatalf("the restore did not put the transcript where the restored main runs look: %v", err)
	}
	if got := savedSession(t, w2.data, ""); got != saved {
		t.Fatalf("restored session %q, want %q", got, saved)
	}
	in2.Start()
	in2.WaitNext("local:main", e2e.Equals("first answer")) // what the local channel sent is restored too
	in2.Post("local:main", "Owner", "MEMORY-TWO what was the word?")
	if m := in2.WaitNext("local:main", func(s string) bool { return s != "" }); m.Text != "resumed answer" {
		t.Fatalf("after the restore main answered %q: it did not resume its session", m.Text)
	}
	logs, _ := filepath.Glob(filepath.Join(w2.groupDir("main"), "logs", "agent-*.log"))
	resumed := false
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		resumed = resumed || strings.Contains(string(b), saved)
	}
	if !resumed {
		t.Errorf("no run log of the restored main group names the session %s it was to resume", saved)
	}
}

// savedSession waits until the main group's saved session differs from
// not, and returns it.
func savedSession(t *testing.T, dataDir, not string) string {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dataDir, "nanoclaw.db")+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The session is saved when the run ends, just after the answer.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var id string
		db.QueryRow(`SELECT session_id FROM sessions WHERE folder = 'main'`).Scan(&id)
		if id != "" && id != not {
			return id
		}
		if time.Now().After(deadline) {
			t.Fatal("no session saved for the main group")
		}
	}
}
