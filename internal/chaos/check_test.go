package chaos

import (
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/e2e"
)

// check reads the history the daemon left and fails on anything lost or
// doubled.
func (h *history) check(t *testing.T, in *e2e.Install, agentLog string) {
	t.Helper()
	sent := in.AllSent()
	lost, doubled := 0, 0
	for _, ps := range h.posted {
		c := countIn(sent, ps.chat, ps.token)
		switch {
		case c > 1:
			doubled++
			t.Errorf("message %s in %s answered %d times", ps.token, ps.chat, c)
		case c == 0 && ps.call && !failedIn(sent, ps.chat):
			lost++
			t.Errorf("call %s in %s never answered (nor reported failed)", ps.token, ps.chat)
			dumpFor(t, in, strings.TrimPrefix(ps.chat, "local:"), ps.token)
		}
	}
	// A run the daemon's death interrupted is run again, and its agent
	// then writes its IPC message again: each file written is sent once.
	written := map[string]int{}
	if data, err := os.ReadFile(agentLog); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if tok, ok := strings.CutPrefix(line, "ipc "); ok {
				written[tok]++
			}
		}
	}
	ipcSent := map[string]int{}
	for _, m := range sent {
		if tok, ok := strings.CutPrefix(m.Text, "ipc "); ok {
			ipcSent[tok]++
		}
	}
	for tok, w := range written {
		if c := ipcSent[tok]; c != w {
			if c < w {
				lost++
			} else {
				doubled++
			}
			t.Errorf("IPC message %s written %d times by agents was sent %d times", tok, w, c)
		}
	}
	audited := map[string]int{}
	for _, f := range []string{"g5"} {
		data, _ := os.ReadFile(filepath.Join(in.Dir, "groups", f, "logs", "security.jsonl"))
		for _, tok := range tokenRE.FindAllString(string(data), -1) {
			audited[tok]++
		}
	}
	total := 0
	for tok, c := range audited {
		total += c
		if c > 1 {
			doubled++
			t.Errorf("violation %s audited %d times", tok, c)
		}
	}
	alerted := 0
	moreRE := regexp.MustCompile(`^\[SANDBOX ALERT\] \+(\d+) more`)
	for _, m := range sent {
		if m.ChatJID != "local:main" || !strings.HasPrefix(m.Text, "[SANDBOX ALERT]") {
			continue
		}
		if sm := moreRE.FindStringSubmatch(m.Text); sm != nil {
			k, _ := strconv.Atoi(sm[1])
			alerted += k
		} else {
			alerted++
		}
	}
	if alerted != total {
		t.Errorf("alerts account for %d violations, the audit trail holds %d", alerted, total)
	}
	t.Logf("checked: %d messages posted (%d calls), %d IPC messages written by agents, %d violations audited, %d alerted; lost %d, doubled %d",
		len(h.posted), calls(h.posted), len(written), total, alerted, lost, doubled)
}

// dumpFor logs what the daemon and the group's runs said, to find where
// a message went.
func dumpFor(t *testing.T, in *e2e.Install, folder, token string) {
	logs, _ := filepath.Glob(filepath.Join(in.Dir, "data", "logs", "*.log*"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"`+folder+`"`) || strings.Contains(line, "running") || strings.Contains(line, "error") {
				t.Logf("daemon: %s", line)
			}
		}
	}
	runs, _ := filepath.Glob(filepath.Join(in.Dir, "groups", folder, "logs", "agent-*.log"))
	for _, r := range runs {
		data, _ := os.ReadFile(r)
		if strings.Contains(string(data), token) || len(runs) < 20 {
			t.Logf("run log %s:\n%s", filepath.Base(r), data)
		}
	}
	if db, err := sql.Open("sqlite3", "file:"+filepath.Join(in.Dir, "data", "nanoclaw.db")+"?mode=ro"); err == nil {
		var seq, cursor int64
		db.QueryRow(`SELECT seq FROM messages WHERE text LIKE ?`, "%"+token).Scan(&seq)
		db.QueryRow(`SELECT answered_seq FROM cursors WHERE chat_jid = ?`, "local:"+folder).Scan(&cursor)
		t.Logf("%s: seq %d; the chat's answered position %d", token, seq, cursor)
		rows, _ := db.Query(`SELECT id, kind, sent_at IS NOT NULL, COALESCE(last_error, ''), text LIKE ? FROM outbox WHERE chat_jid = ? ORDER BY id`, "%"+token+"<%", "local:"+folder)
		for rows != nil && rows.Next() {
			var id int64
			var kind, lastErr string
			var sentFlag, has bool
			rows.Scan(&id, &kind, &sentFlag, &lastErr, &has)
			t.Logf("outbox %d %s sent=%v err=%q holds the token=%v", id, kind, sentFlag, lastErr, has)
		}
		db.Close()
	}
	var sent []string
	for _, m := range in.AllSent() {
		if m.ChatJID == "local:"+folder {
			sent = append(sent, m.Text)
		}
	}
	t.Logf("sent to %s: %q", folder, sent)
}

func calls(ps []posted) int {
	n := 0
	for _, p := range ps {
		if p.call {
			n++
		}
	}
	return n
}

// countIn counts the replies in chat that carry token (a reply echoes its
// whole prompt, so it carries every message it answered).
func countIn(sent []e2e.Sent, chat, token string) int {
	n := 0
	for _, m := range sent {
		if m.ChatJID == chat && strings.Contains(m.Text, " "+token+"<") {
			n++
		}
	}
	return n
}

func failedIn(sent []e2e.Sent, chat string) bool {
	for _, m := range sent {
		if m.ChatJID == chat && strings.Contains(m.Text, "could not answer") {
			return true
		}
	}
	return false
}
