// Package chaos runs the real daemon under a mixed load while faults hit it
// at random moments, and then checks the recorded history.
//
// The load: calls and chatter in four groups (two need @Andy), agents that
// stay and answer follow-ups, IPC messages and schedule_task files written
// by the main group's agent, scheduled tasks firing (two interval tasks
// from the start, once-tasks throughout), violations and refused IPC files
// (a forged token, a message for another group's chat) from a fifth group.
// The faults: every cycle a kill -9 of the daemon, and maybe one more —
// kill -9 of an agent, the database locked by another process (sometimes
// past the daemon's busy timeout, with messages posted meanwhile), the
// agent program gone for a while, a group added and removed, the config
// edited, the local channel down for a while (the daemon run without it).
// The clock is not stepped: the daemon reads the wall clock through Go's
// vDSO calls, which libfaketime does not reach, a time namespace offsets
// only the monotonic clocks, and stepping the host's clock would disturb
// everything else running on it.
//
// The checker (check_test.go, tasks_test.go): every call answered exactly
// once (or its chat told the assistant could not answer), no message the
// daemon refused answered, every IPC message written sent exactly once,
// every refused IPC file quarantined and audited exactly once, every
// violation frame audited at most once with the alerts adding up, every task
// created once and fired with no slot run twice, no agent left running
// after a clean stop, the database intact. The report (report_test.go)
// counts the faults and what was checked, and plots the daemon's memory
// and open descriptors.
//
// `make chaos` runs the long version: CHAOS_CYCLES (default here 25, so
// `go test ./...` stays short) and CHAOS_SEED to replay a run. CHAOS_MINUTES
// makes it a soak instead: the same load and faults for that long, but the
// daemon itself is never killed (nor run without its channel), so its
// memory and open descriptors must stay flat over the whole time.
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
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m) }

// posted is one message the test sent in.
type posted struct {
	chat, token string
	call        bool // it calls the assistant (else it is context)
}

// history is what the test did and saw.
type history struct {
	posted       []posted
	refusedPosts []posted // refused with an error while the database was locked
	lockedPosts  int      // posted while the database was locked
	longestLock  time.Duration
	heldMax      int // the largest outbox backlog while the local channel was down
	faults       map[string]int
	cycles       int
	rss, fds     []int // the daemon's, sampled once a cycle
	pid          int   // the daemon's last sampled
	startedAt    time.Time
	checked      map[string]int // what the checker looked at, for the report
	lost         int
	doubled      int
}

// Tokens tie what the test posted to what came out: tok- for messages and
// violations, ref- for IPC files that must be refused, job- for tasks.
var (
	tokenRE = regexp.MustCompile(`tok-[0-9]+-[0-9]+`)
	refRE   = regexp.MustCompile(`ref-[0-9]+-[0-9]+`)
	jobRE   = regexp.MustCompile(`job-[0-9]+-[0-9]+`)
)

func TestChaos(t *testing.T) {
	cycles := envInt("CHAOS_CYCLES", 25)
	soak := time.Duration(envInt("CHAOS_MINUTES", 0)) * time.Minute
	if soak > 0 {
		cycles = 1 << 30
	}
	seed := uint64(envInt("CHAOS_SEED", int(time.Now().UnixNano()%1_000_000)))
	rng := rand.New(rand.NewPCG(seed, seed))
	if soak > 0 {
		t.Logf("chaos: a soak of %s, seed %d (CHAOS_SEED=%d replays it)", soak, seed, seed)
	} else {
		t.Logf("chaos: %d cycles, seed %d (CHAOS_SEED=%d replays it)", cycles, seed, seed)
	}

	// Confined agents (another user under a root daemon) and the main
	// group's (the daemon's user) append to the same log.
	scratch := e2e.Shared(t, t.TempDir())
	agentLog := filepath.Join(scratch, "agent.log")
	if err := os.WriteFile(agentLog, nil, 0o666); err != nil || os.Chmod(agentLog, 0o666) != nil {
		t.Fatal(err)
	}
	agent := e2e.Testagent(t)
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(agent) + `], "timeout": "60s", "idleTimeout": "60s", "maxConcurrent": 4,
			"env": ["TESTAGENT_LOG"]`,
		Alerts:   `"cooldown": "2s"`,
		Security: `"allowWrite": [` + e2e.Quote(scratch) + `]`,
		Env:      []string{"TESTAGENT_LOG=" + agentLog},
		Wait:     2 * time.Minute,
		// The end is a clean stop, after which no agent may be left.
		StopSignal: syscall.SIGTERM,
	})
	db := filepath.Join(in.Dir, "data", "nanoclaw.db")
	// g1, g2 answer every message, g3, g4 only a call with @Andy (the rest
	// is context); an agent runs only the last command of its batch, so IPC
	// messages and tasks go through main, violations and refused files
	// through g5, and the echoed prompts of g1-g4 show which messages each
	// reply answered.
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
	h := &history{faults: map[string]int{}, checked: map[string]int{}, startedAt: time.Now()}
	defer h.report(t, seed)
	p := in.Start()
	n := 0
	token := func(kind string) string { n++; return fmt.Sprintf("%s-%d-%d", kind, seed, n) }
	// Two interval tasks (one minute, the shortest allowed) from the
	// start, so that they fire while the faults go on.
	for range 2 {
		job := token("job")
		in.Post("local:main", "Owner", "task interval 60000 "+job)
		in.WaitFor("local:main", e2e.Equals("scheduled "+job))
	}
	// calling is text as a call to the assistant in chat.
	calling := func(chat, text string) string {
		if chat >= "local:g3" {
			return "@Andy " + text
		}
		return text
	}

	end := time.Now().Add(soak)
	for cycle := 1; cycle <= cycles && (soak == 0 || time.Now().Before(end)); cycle++ {
		h.cycles = cycle
		for range 3 + rng.IntN(6) {
			chat := chats[rng.IntN(len(chats))]
			tok := token("tok")
			switch r := rng.IntN(20); {
			case r < 9: // a call the agent answers with its whole prompt
				in.Post(chat, "U", calling(chat, "prompt "+tok))
				h.posted = append(h.posted, posted{chat, tok, true})
			case r < 10: // the agent stays, answering what follows as follow-ups
				in.Post(chat, "U", calling(chat, "converse "+tok))
				h.posted = append(h.posted, posted{chat, tok, true})
			case r < 13 && chat >= "local:g3": // chatter: context for the next call (worded so
				// that, last in a batch, it still makes the stand-in echo the whole prompt)
				in.Post(chat, "U", "prompt chatter "+tok)
				h.posted = append(h.posted, posted{chat, tok, false})
			case r < 15: // an IPC message written by the agent
				in.Post("local:main", "Owner", "ipc "+tok)
			case r < 16: // a task through IPC, due in a few seconds
				in.Post("local:main", "Owner", fmt.Sprintf("task once +%d %s", 1+rng.IntN(4), token("job")))
			case r < 18: // a blocked action
				in.Post("local:g5", "U", "violation filesystem /chaos/"+tok)
			case r < 19: // an IPC file with a forged token
				in.Post("local:g5", "U", "ipc-forged "+token("ref"))
			default: // an IPC message for another group's chat
				in.Post("local:g5", "U", "ipc-to local:g1 "+token("ref"))
			}
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // the fault lands anywhere in the work
		// Every cycle ends in a kill -9 of the daemon (but in a soak); one
		// more fault may land before it.
		switch f := rng.IntN(11); {
		case f < 4:
			// none besides the kill
		case f < 6:
			if killAnAgent(agent) {
				h.faults["kill -9 agent"]++
			}
		case f < 7:
			// Past the 5 s busy timeout a third of the time: the daemon then
			// refuses messages meanwhile, and its own writes fail.
			h.faults["database locked"]++
			d := time.Duration(500+rng.IntN(7500)) * time.Millisecond
			h.longestLock = max(h.longestLock, d)
			held, done := make(chan struct{}), make(chan error, 1)
			go func() { done <- lockDB(db, d, held) }()
			<-held
			for range 1 + rng.IntN(3) {
				chat, tok := chats[rng.IntN(len(chats))], token("tok")
				h.lockedPosts++
				if err := tryPost(in, chat, calling(chat, "prompt "+tok)); err == nil {
					h.posted = append(h.posted, posted{chat, tok, true})
				} else {
					h.refusedPosts = append(h.refusedPosts, posted{chat, tok, true})
					t.Logf("while the database is locked, %s gets: %v", tok, err)
				}
			}
			if err := <-done; err != nil {
				t.Log(err)
			}
		case f < 8:
			h.faults["agent program missing"]++
			os.Rename(agent, agent+".gone")
			time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
			os.Rename(agent+".gone", agent)
		case f < 9:
			h.faults["group added and removed"]++
			in.CLI("groups", "add", "--jid", "local:extra", "--name", "Extra", "--folder", "extra")
			in.CLI("groups", "remove", "extra")
		case f < 10:
			h.faults["config edited"]++
			cfg, _ := os.ReadFile(in.Config)
			os.WriteFile(in.Config, append(cfg, []byte("\n// edited by the chaos test\n")...), 0o600)
		default:
			if soak > 0 {
				break // a soak keeps one daemon
			}
			h.faults["kill -9 daemon"]++
			p.Kill9()
			h.faults["local channel down"]++
			h.heldMax = max(h.heldMax, channelDown(t, in, time.Duration(1000+rng.IntN(3000))*time.Millisecond))
			h.faults["kill -9 daemon"]++
			p = in.Start()
		}
		h.sample(p.Cmd.Process.Pid)
		if soak == 0 {
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
			h.faults["kill -9 daemon"]++
			p.Kill9()
			p = in.Start()
		}
	}

	// Once the faults stop, every call is answered and every task fires;
	// then the last alert windows close.
	unsettled := func() string {
		sent := in.AllSent()
		for _, ps := range h.posted {
			if ps.call && countIn(sent, ps.chat, ps.token) == 0 && !failedIn(sent, ps.chat) {
				return "call " + ps.token + " unanswered"
			}
		}
		return waiting(t, in, agentWrote(agentLog)["task"])
	}
	for deadline := time.Now().Add(2 * time.Minute); unsettled() != "" && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	// The alert windows close and their summaries go out: the 2 s
	// cooldown's, and the per-group cap's (ten a minute), which may hold a
	// summary back for up to a minute.
	time.Sleep(3 * time.Second)
	for deadline := time.Now().Add(75 * time.Second); !alertsSettled(t, in) && time.Now().Before(deadline); {
		time.Sleep(time.Second)
	}
	h.check(t, in, agentLog)
	if soak > 0 {
		h.checkFlat(t)
	}
	p.Stop()
	e2e.WaitNoProcs(t, agent, "agents after the daemon stopped")
	integrity(t, db)
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
	var refused []string // must never be answered: the sender was told it failed
	for i := range 40 {
		tok := fmt.Sprintf("full-%d", i)
		if err := tryPost(in, "local:main", "prompt "+tok); err == nil {
			accepted = append(accepted, tok)
		} else {
			refused = append(refused, tok)
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
	for _, tok := range refused {
		if c := countIn(in.AllSent(), "local:main", tok); c != 0 {
			t.Errorf("%s was refused with an error while the disk was full, yet answered %d times", tok, c)
		}
	}
	appendReport(t, fmt.Sprintf("disk full (a 24 MiB tmpfs data dir): %d messages refused with an error while full (none answered later), %d accepted and answered once space was back",
		len(refused), len(accepted)))
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
