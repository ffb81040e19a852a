package chaos

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// check reads the history the daemon left and fails on anything lost or
// doubled; what it looked at goes to h.checked for the report.
func (h *history) check(t *testing.T, in *e2e.Install, agentLog string) {
	t.Helper()
	sent := in.AllSent()
	written := agentWrote(agentLog)
	h.checkCalls(t, in, sent)
	h.checkIPC(t, sent, written["ipc"], written["ipc-begin"])
	h.checkRefused(t, in, sent, written)
	h.checkTasks(t, in, sent, written["task"])
	h.checkAudit(t, in, sent, written["violation"])
	t.Logf("checked: %v; lost %d, doubled %d", h.checked, h.lost, h.doubled)
}

// checkCalls: every call answered exactly once (or its chat told the
// assistant could not answer), no message answered twice, and no message
// the daemon refused with an error answered at all.
func (h *history) checkCalls(t *testing.T, in *e2e.Install, sent []e2e.Sent) {
	for _, ps := range h.posted {
		c := countIn(sent, ps.chat, ps.token)
		switch {
		case c > 1:
			h.doubled++
			t.Errorf("message %s in %s answered %d times", ps.token, ps.chat, c)
			for _, m := range sent {
				if m.ChatJID == ps.chat && strings.Contains(m.Text, ps.token) {
					t.Logf("sent #%d at %s: %.300q", m.Seq, m.Time, m.Text)
				}
			}
			dumpFor(t, in, strings.TrimPrefix(ps.chat, "local:"), ps.token)
		case c == 0 && ps.call && !failedIn(sent, ps.chat):
			h.lost++
			t.Errorf("call %s in %s never answered (nor reported failed)", ps.token, ps.chat)
			dumpFor(t, in, strings.TrimPrefix(ps.chat, "local:"), ps.token)
		}
	}
	for _, ps := range h.refusedPosts {
		if c := countIn(sent, ps.chat, ps.token); c > 0 {
			h.doubled++
			t.Errorf("message %s in %s was refused with an error, yet answered %d times", ps.token, ps.chat, c)
		}
	}
	h.checked["messages posted"] = len(h.posted)
	h.checked["calls"] = calls(h.posted)
	h.checked["messages refused while the database was locked"] = len(h.refusedPosts)
}

// checkIPC: a run the daemon's death interrupted is run again, and its
// agent then writes its IPC message again: each file written is sent once.
// The agent notes a file before and after it publishes it, and the kill
// may fall in between, so each token is sent at least as often as it was
// surely written (done) and at most as often as it was begun.
func (h *history) checkIPC(t *testing.T, sent []e2e.Sent, done, begun map[string]int) {
	ipcSent := map[string]int{}
	for _, m := range sent {
		if tok, ok := strings.CutPrefix(m.Text, "ipc "); ok {
			ipcSent[tok]++
		}
	}
	for tok, b := range begun {
		c, w := ipcSent[tok], done[tok]
		switch {
		case c < w:
			h.count(c, w)
			t.Errorf("IPC message %s written %d times by agents was sent %d times", tok, w, c)
		case c > b:
			h.count(c, b)
			t.Errorf("IPC message %s begun %d times by agents was sent %d times", tok, b, c)
		}
	}
	h.checked["IPC messages written"] = sum(done)
}

// checkRefused: every IPC file g5's agents wrote with a forged token or for
// another group's chat is quarantined in ipc/errors once, audited once in
// security.jsonl and once in `nanoclawd violations`, and never sent.
func (h *history) checkRefused(t *testing.T, in *e2e.Install, sent []e2e.Sent, written map[string]map[string]int) {
	quarantined := map[string]int{}
	entries, _ := os.ReadDir(filepath.Join(in.Dir, "data", "ipc", "errors"))
	for _, e := range entries {
		if tok := refRE.FindString(e.Name()); tok != "" && strings.HasSuffix(e.Name(), ".json") {
			quarantined[tok]++
		}
	}
	lines, listed := audit(t, in, refRE)
	// As in checkIPC: an agent killed between publishing a file and
	// noting it leaves a file it never noted as written, so each is
	// handled at least as often as it was surely written and at most as
	// often as it was begun.
	for _, kind := range []string{"forged", "cross"} {
		for tok, b := range written[kind+"-begin"] {
			w := written[kind][tok]
			for what, c := range map[string]int{"quarantined": quarantined[tok], "in security.jsonl": lines[tok], "in `nanoclawd violations`": listed[tok]} {
				switch {
				case c < w:
					h.count(c, w)
					t.Errorf("IPC file %s (%s) written %d times by agents is %s %d times", tok, kind, w, what, c)
				case c > b:
					h.count(c, b)
					t.Errorf("IPC file %s (%s) begun %d times by agents is %s %d times", tok, kind, b, what, c)
				}
			}
		}
	}
	for _, m := range sent {
		if tok := refRE.FindString(m.Text); tok != "" && strings.HasPrefix(m.Text, "ipc ") {
			h.doubled++
			t.Errorf("refused IPC file %s was carried out: %q sent to %s", tok, m.Text, m.ChatJID)
		}
	}
	h.checked["IPC files refused"] = sum(written["forged"]) + sum(written["cross"])
}

// checkAudit: each violation frame an agent wrote is audited at most once
// (the agent, or the daemon, may be killed before the frame is read; a run
// the daemon's death interrupted is run again and its agent then reports
// the violation again), the same in security.jsonl and in `nanoclawd
// violations`, and the alerts sent to main account for every audited
// violation and refused IPC file.
func (h *history) checkAudit(t *testing.T, in *e2e.Install, sent []e2e.Sent, reported map[string]int) {
	frames := map[string]int{}
	for target, c := range reported {
		frames[tokenRE.FindString(target)] += c
	}
	lines, listed := audit(t, in, tokenRE)
	total := 0
	for tok, c := range lines {
		total += c
		if c > frames[tok] {
			h.doubled++
			t.Errorf("violation %s reported %d times by agents was audited %d times", tok, frames[tok], c)
		}
		if listed[tok] != c {
			h.count(listed[tok], c)
			t.Errorf("violation %s: %d lines in security.jsonl, %d in `nanoclawd violations`", tok, c, listed[tok])
		}
	}
	refLines, _ := audit(t, in, refRE)
	total += sum(refLines)
	alerted := alertedIn(sent)
	if alerted != total {
		t.Errorf("alerts account for %d violations, the audit trail holds %d", alerted, total)
	}
	h.checked["violations reported by agents"] = sum(frames)
	h.checked["violations audited"] = sum(lines)
	h.checked["alerts (violations alerted)"] = alerted
}

var moreRE = regexp.MustCompile(`^\[SANDBOX ALERT\] \+(\d+) more`)

// alertedIn counts the violations the alerts in sent to main account for
// (a summary "+N more …" for N).
func alertedIn(sent []e2e.Sent) int {
	alerted := 0
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
	return alerted
}

// alertsSettled reports whether the alerts to main account for every
// audited violation and refused file yet.
func alertsSettled(t *testing.T, in *e2e.Install) bool {
	lines, _ := audit(t, in, tokenRE)
	refLines, _ := audit(t, in, refRE)
	return alertedIn(in.AllSent()) >= sum(lines)+sum(refLines)
}

// audit counts, per token re finds, the lines of g5's security.jsonl and
// the entries of `nanoclawd violations --json` that hold it.
func audit(t *testing.T, in *e2e.Install, re *regexp.Regexp) (lines, listed map[string]int) {
	lines, listed = map[string]int{}, map[string]int{}
	data, _ := os.ReadFile(filepath.Join(in.Dir, "groups", "g5", "logs", "security.jsonl"))
	for _, l := range strings.Split(string(data), "\n") {
		if tok := re.FindString(l); tok != "" {
			lines[tok]++
		}
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(in.CLI("violations", "--group", "g5", "--json")), &list); err != nil {
		t.Fatalf("nanoclawd violations --json: %v", err)
	}
	for _, v := range list {
		if tok := re.FindString(string(v)); tok != "" {
			listed[tok]++
		}
	}
	return lines, listed
}

// count adds a mismatch between c times seen and w times wanted.
func (h *history) count(c, w int) {
	if c < w {
		h.lost++
	} else {
		h.doubled++
	}
}

// agentWrote reads the agents' log of what they did: per kind (ipc,
// cross, forged, task: IPC files; violation: frames), how many times each
// token (or violation target) was written.
func agentWrote(path string) map[string]map[string]int {
	out := map[string]map[string]int{}
	data, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(data), "\n") {
		if kind, tok, ok := strings.Cut(line, " "); ok {
			if out[kind] == nil {
				out[kind] = map[string]int{}
			}
			out[kind][tok]++
		}
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
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
