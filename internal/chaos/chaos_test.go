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
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

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
		if code, body := tryPost(t, in, "local:main", "prompt "+tok); code == 202 {
			accepted = append(accepted, tok)
		} else {
			refused++
			if i == 0 {
				t.Logf("while the disk is full, a message gets %d: %s", code, body)
			}
		}
	}
	os.Remove(filler)
	for i := range 5 {
		tok := fmt.Sprintf("after-%d", i)
		if code, body := tryPost(t, in, "local:main", "prompt "+tok); code != 202 {
			t.Fatalf("after the disk has space again a message gets %d: %s", code, body)
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

// tryPost posts a message and returns the status and body, whatever they are.
func tryPost(t *testing.T, in *e2e.Install, chat, text string) (int, string) {
	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", in.Socket)
	}}, Timeout: 30 * time.Second}
	body, _ := json.Marshal(map[string]string{"chatJid": chat, "sender": "u@local", "senderName": "U", "text": text})
	resp, err := c.Post("http://local/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
