package chaos

import (
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// killAnAgent kills one running agent with SIGKILL.
func killAnAgent(path string) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == path {
			pid, _ := strconv.Atoi(e.Name())
			if p, err := os.FindProcess(pid); err == nil && p.Kill() == nil {
				return true
			}
		}
	}
	return false
}

// lockDB holds an exclusive lock on the database for d, as another
// process (a backup tool, sqlite3 at a prompt) might.
func lockDB(t *testing.T, path string, d time.Duration) {
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000&_txlock=exclusive")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Logf("could not lock the database: %v", err)
		return
	}
	time.Sleep(d)
	tx.Rollback()
}
