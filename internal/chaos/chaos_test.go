// Package chaos runs the real daemon under a mixed load while faults hit it
// at random moments — kill -9 of the daemon and of agents, the database
// locked by another process, the agent program gone for a while, group and
// config changes — and then checks the recorded history: every message
// answered at most once (and every call answered), every IPC message sent
// exactly once, every violation audited at most once with alerts adding up,
// no agent left running, the database intact.
//
// `make chaos` runs the long version: CHAOS_CYCLES (default here 25, so
// `go test ./...` stays short) and CHAOS_SEED to replay a run. CHAOS_MINUTES
// makes it a soak instead: the same load and faults for that long, but the
// daemon itself is never killed, so its memory and file descriptors can be
// watched over the whole time (open descriptors must not grow).
package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m) }

// posted is one message the test sent in.
type posted struct {
	chat, token string
	call        bool // it calls the assistant (else it is context)
}

// history is what the test did and saw.
type history struct {
	posted    []posted
	faults    map[string]int
	rss, fds  []int // the daemon's, sampled once a cycle
	startedAt time.Time
}

var tokenRE = regexp.MustCompile(`tok-[0-9]+-[0-9]+`)

func TestChaos(t *testing.T) {
	cycles := envInt("CHAOS_CYCLES", 25)
	soak := time.Duration(envInt("CHAOS_MINUTES", 0)) * time.Minute
	if soak > 0 {
		cycles = 1 << 30
	}
	seed := uint64(envInt("CHAOS_SEED", int(time.Now().UnixNano()%1_000_000)))
	rng := rand.New(rand.NewPCG(seed, seed))
	t.Logf("chaos: %d cycles, seed %d (CHAOS_SEED=%d replays it)", cycles, seed, seed)

	scratch := t.TempDir()
	agentLog := filepath.Join(scratch, "agent.log")
	agent := e2e.Testagent(t)
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(agent) + `], "timeout": "60s", "idleTimeout": "60s", "maxConcurrent": 4,
			"env": ["TESTAGENT_LOG"]`,
		Alerts:   `"cooldown": "2s"`,
		Security: `"allowWrite": [` + e2e.Quote(scratch) + `]`,
		Env:      []string{"TESTAGENT_LOG=" + agentLog},
		Wait:     2 * time.Minute,
	})
	// g1, g2 answer every message, g3, g4 only a call with @Andy (the rest
	// is context); an agent runs only the last command of its batch, so IPC
	// messages go through main and violations through g5, and the echoed
	// prompts of g1-g4 show which messages each reply answered.
	in.AddGroup("local:main", "main", "--main")
	chats := []string{"local:g1", "local:g2", "local:g3", "local:g4"}
	for i, c := range chats {
		if i < 2 {
			in.AddGroup(c, fmt.Sprintf("g%d", i+1), "--no-trigger")
		} else {
			in.AddGroup(c, fmt.Sprintf("g%d", i+1)) // needs @Andy
		}
	}
	in.AddGroup("local:g5", "g5", "--no-trigger")
	h := &history{faults: map[string]int{}, startedAt: time.Now()}
	p := in.Start()
	n := 0
	token := func() string { n++; return fmt.Sprintf("tok-%d-%d", seed, n) }

	end := time.Now().Add(soak)
	for cycle := 1; cycle <= cycles && (soak == 0 || time.Now().Before(end)); cycle++ {
		for range 3 + rng.IntN(6) {
			chat := chats[rng.IntN(len(chats))]
			tok := token()
			trigger := chat >= "local:g3"
			switch r := rng.IntN(10); {
			case r < 5: // a call the agent answers with its whole prompt
				text := "prompt " + tok
				if trigger {
					text = "@Andy " + text
				}
				in.Post(chat, "U", text)
				h.posted = append(h.posted, posted{chat, tok, true})
			case r < 7 && trigger: // chatter: context for the next call (worded so that,
				// last in a batch, it still makes the stand-in echo the whole prompt)
				in.Post(chat, "U", "prompt chatter "+tok)
				h.posted = append(h.posted, posted{chat, tok, false})
			case r < 9: // an IPC message written by the agent
				in.Post("local:main", "Owner", "ipc "+tok)
			default: // a blocked action
				in.Post("local:g5", "U", "violation filesystem /chaos/"+tok)
			}
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // the fault lands anywhere in the work
		// Every cycle ends in a kill -9 of the daemon (but in a soak); one
		// more fault may land before it.
		switch f := rng.IntN(10); {
		case f < 4:
			// none besides the kill
		case f < 6:
			if killAnAgent(agent) {
				h.faults["kill -9 agent"]++
			}
		case f < 7:
			h.faults["database locked"]++
			lockDB(t, filepath.Join(in.Dir, "data", "nanoclaw.db"), time.Duration(500+rng.IntN(1500))*time.Millisecond)
		case f < 8:
			h.faults["agent program missing"]++
			os.Rename(agent, agent+".gone")
			time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
			os.Rename(agent+".gone", agent)
		case f < 9:
			h.faults["group added and removed"]++
			in.CLI("groups", "add", "--jid", "local:extra", "--name", "Extra", "--folder", "extra")
			in.CLI("groups", "remove", "extra")
		default:
			h.faults["config edited"]++
			cfg, _ := os.ReadFile(in.Config)
			os.WriteFile(in.Config, append(cfg, []byte("\n// edited by the chaos test\n")...), 0o600)
		}
		h.sample(p.Cmd.Process.Pid)
		if soak == 0 {
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
			h.faults["kill -9 daemon"]++
			p.Kill9()
			p = in.Start()
		}
	}

	// Every call is answered once the faults stop; give the last alert
	// windows time to close.
	pending := func() []posted {
		sent := in.AllSent()
		var out []posted
		for _, ps := range h.posted {
			if ps.call && countIn(sent, ps.chat, ps.token) == 0 && !failedIn(sent, ps.chat) {
				out = append(out, ps)
			}
		}
		return out
	}
	for deadline := time.Now().Add(2 * time.Minute); len(pending()) > 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(3 * time.Second) // the 2 s alert windows end and their summaries go out
	h.check(t, in, agentLog)
	if soak > 0 && len(h.fds) >= 8 {
		q := len(h.fds) / 4
		if first, last := maxOf(h.fds[:q]), maxOf(h.fds[len(h.fds)-q:]); last > first+20 {
			t.Errorf("the daemon's open file descriptors grew over the soak: %d at most in the first quarter, %d in the last", first, last)
		}
	}
	cycles = len(h.rss)
	p.Stop()
	e2e.WaitNoProcs(t, agent, "agents after the daemon stopped")
	integrity(t, filepath.Join(in.Dir, "data", "nanoclaw.db"))
	h.report(t, cycles, seed)
}

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

func (h *history) sample(pid int) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.Atoi(strings.Fields(v)[0])
				h.rss = append(h.rss, kb/1024)
			}
		}
	}
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		h.fds = append(h.fds, len(fds))
	}
}

func (h *history) report(t *testing.T, cycles int, seed uint64) {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos report: %d cycles in %s (seed %d)\n", cycles, time.Since(h.startedAt).Round(time.Second), seed)
	for k, v := range h.faults {
		fmt.Fprintf(&b, "  fault %-24s %d\n", k, v)
	}
	fmt.Fprintf(&b, "  daemon RSS MiB per cycle: %v\n", h.rss)
	fmt.Fprintf(&b, "  daemon open FDs per cycle: %v\n", h.fds)
	t.Log(b.String())
	if out := os.Getenv("CHAOS_REPORT"); out != "" {
		os.WriteFile(out, []byte(b.String()), 0o644)
	}
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
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

func integrity(t *testing.T, path string) {
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil || res != "ok" {
		t.Errorf("integrity_check: %q %v", res, err)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// The data dir fills up (a small tmpfs here): messages the daemon cannot
// store are refused at once with a 500 that says so — never accepted and
// then lost — and once space is back everything accepted is answered.
func TestChaosDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs for the data dir")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", data).Run() })
	in := e2e.New(t, e2e.Options{Dir: dir})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	filler := filepath.Join(data, "filler")
	fill := exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=1M", "count=64")
	fill.Run() // stops at ENOSPC, which is the point
	var accepted []string
	refused := 0
	for i := range 40 {
		tok := fmt.Sprintf("full-%d", i)
		if err := tryPost(in, "local:main", "prompt "+tok); err == nil {
			accepted = append(accepted, tok)
		} else {
			refused++
			if i == 0 {
				t.Logf("while the disk is full, a message gets: %v", err)
			}
		}
	}
	os.Remove(filler)
	for i := range 5 {
		tok := fmt.Sprintf("after-%d", i)
		if err := tryPost(in, "local:main", "prompt "+tok); err != nil {
			t.Fatalf("after the disk has space again a message gets: %v", err)
		}
		accepted = append(accepted, tok)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		missing := 0
		sent := in.AllSent()
		for _, tok := range accepted {
			if countIn(sent, "local:main", tok) == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d accepted messages were never answered after the disk had space again", missing, len(accepted))
		}
	}
	for _, tok := range accepted {
		if c := countIn(in.AllSent(), "local:main", tok); c != 1 {
			t.Errorf("%s answered %d times", tok, c)
		}
	}
	t.Logf("disk full: %d messages refused with an error while full, %d accepted and answered", refused, len(accepted))
	p.Stop()
	integrity(t, filepath.Join(data, "nanoclaw.db"))
}

// tryPost posts a message and returns why it was not accepted, if it was not.
func tryPost(in *e2e.Install, chat, text string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := in.Local.Post(ctx, local.Message{ChatJID: chat, Sender: "u@local", SenderName: "U", Text: text})
	return err
}
