package sdkproof

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

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
	// The session is saved when the run ends, just after the answer.
	var saved string
	for deadline := time.Now().Add(30 * time.Second); saved == ""; time.Sleep(20 * time.Millisecond) {
		db.QueryRow(`SELECT session_id FROM sessions WHERE folder = 'main'`).Scan(&saved)
		if time.Now().After(deadline) {
			t.Fatal("no session saved after the first answer")
		}
	}
	const lost = "3f1c2d4e-0000-4000-8000-00000000dead" // a transcript the CLI never had
	if _, err := db.Exec(`UPDATE sessions SET session_id = ? WHERE folder = 'main'`, lost); err != nil {
		t.Fatal(err)
	}

	in.Post("local:main", "Owner", "SESSION-TWO are you there?")
	m := in.WaitNext("local:main", func(s string) bool { return s == "second answer" || strings.Contains(s, "could not answer") })
	if m.Text != "second answer" {
		t.Fatalf("the lost session failed the group: %q", m.Text)
	}
	// The fresh session is kept (saved when the run ends).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var now string
		db.QueryRow(`SELECT session_id FROM sessions WHERE folder = 'main'`).Scan(&now)
		if now != lost && now != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("session after recovery %q", now)
		}
	}
}
