package chaos

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// killAnAgent kills one running agent with SIGKILL.
func killAnAgent(path string) bool {
	for _, pid := range e2e.Pids(path) {
		if p, err := os.FindProcess(pid); err == nil && p.Kill() == nil {
			return true
		}
	}
	return false
}

// lockDB holds an exclusive lock on the database for d, as another
// process (a backup tool, sqlite3 at a prompt) might; held is closed once
// the lock is taken. Longer than the daemon's busy timeout (5 s), it makes
// every write of the daemon fail meanwhile: messages are refused, sends
// (the local channel records each one) fail and are retried.
func lockDB(path string, d time.Duration, held chan<- struct{}) error {
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000&_txlock=exclusive")
	if err != nil {
		close(held)
		return err
	}
	defer db.Close()
	tx, err := db.Begin()
	close(held)
	if err != nil {
		return fmt.Errorf("could not lock the database: %w", err)
	}
	time.Sleep(d)
	return tx.Rollback()
}

// channelDown runs the daemon for d without its local channel, the way a
// real deployment runs while WhatsApp is disconnected: it takes no message
// and cannot send, so the replies, IPC messages and alerts it makes wait in
// the outbox. The daemon is then killed with SIGKILL and the config put
// back; the next start sends what waited. It returns the largest outbox
// backlog `nanoclawd status` reported meanwhile. The daemon must not be
// running when it is called.
func channelDown(t *testing.T, in *e2e.Install, d time.Duration) int {
	cfg, err := os.ReadFile(in.Config)
	if err != nil {
		t.Fatal(err)
	}
	off := bytes.Replace(cfg, []byte(`"local": {"enabled": true`), []byte(`"local": {"enabled": false`), 1)
	if bytes.Equal(off, cfg) {
		t.Fatal("channelDown: the config has no enabled local channel to turn off")
	}
	os.WriteFile(in.Config, off, 0o600)
	defer os.WriteFile(in.Config, cfg, 0o600)
	cmd := exec.Command(e2e.Nanoclawd(t), "run", "--config", in.Config)
	cmd.Env = in.Env
	var out e2e.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	held, up := 0, false
	for end := time.Now().Add(d); !up || time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		stdout, _, code := e2e.Run(t, "", in.Env, "status", "--json", "--config", in.Config)
		var st struct{ Outbox []struct{ Count int } }
		if code != 0 || json.Unmarshal([]byte(stdout), &st) != nil {
			if !up && time.Now().After(end.Add(30*time.Second)) {
				t.Fatalf("the daemon without its local channel never answered `nanoclawd status`: %s", out.String())
			}
			continue
		}
		up = true
		n := 0
		for _, b := range st.Outbox {
			n += b.Count
		}
		held = max(held, n)
	}
	return held
}
