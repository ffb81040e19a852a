package e2e_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/atomicfile"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// A stop is clean whenever it comes: the daemon is stopped (SIGINT or
// SIGTERM, never kill -9) at random moments just after config reloads that
// replace its agents started ahead, while a message run may be going;
// nothing it logs on the way out is an error — above all no write to a
// database already closed — and no agent outlives it, a confined one
// caught while its sandbox was being built included. STOPS_CYCLES
// overrides the 50 stops.
func TestStopsAreCleanDuringReloadsAndStandbySwaps(t *testing.T) {
	cycles := 50
	if n, err := strconv.Atoi(os.Getenv("STOPS_CYCLES")); err == nil && n > 0 {
		cycles = n
	}
	if testing.Short() {
		cycles = 3
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, seed))
	agent := e2e.Testagent(t)
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(agent) + `], "warm": 2, "timeout": "60s"`,
		StopSignal: syscall.SIGTERM})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	src, err := os.ReadFile(in.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Both groups active: every start keeps an agent ahead for each.
	p := in.Start()
	in.Post("local:main", "Owner", "echo one")
	in.WaitFor("local:main", e2e.Equals("echo: one"))
	in.Post("local:family", "Ann", "echo two")
	in.WaitFor("local:family", e2e.Equals("echo: two"))
	p.Stop()
	for i := range cycles {
		p := in.Start()
		// Each edit changes agent.idleTimeout: a reload whose fingerprint
		// differs, so both standbys are replaced.
		reloads := 1 + rnd.IntN(3)
		for j := range reloads {
			edited := strings.Replace(string(src), `"timeout": "60s"`, `"timeout": "60s", "idleTimeout": "`+strconv.Itoa(30+i*4+j)+`s"`, 1)
			// All at once: a half-written file is a config error, rightly logged.
			if err := atomicfile.Write(in.Config, []byte(edited), 0o600); err != nil {
				t.Fatal(err)
			}
			if rnd.IntN(3) == 0 {
				in.Post("local:family", "Ann", "sleep 0.2")
			}
			time.Sleep(time.Duration(rnd.IntN(400)) * time.Millisecond) // the random moment, not a synchronisation
		}
		sig := []os.Signal{syscall.SIGINT, syscall.SIGTERM}[rnd.IntN(2)]
		p.Cmd.Process.Signal(sig)
		select {
		case <-p.Done:
		case <-time.After(60 * time.Second):
			p.Cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, in the output logged below
			<-p.Done
			t.Fatalf("stop %d: the daemon did not stop after %v", i, sig)
		}
		if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("stop %d: exit status %d after %v:\n%s", i, code, sig, p.Out.String())
		}
		if bad := errorLines(p.Out.String()); len(bad) > 0 {
			t.Fatalf("stop %d (%v) left error lines on stderr:\n%s", i, sig, strings.Join(bad, "\n"))
		}
		// Every process of every run is gone once the daemon has exited:
		// a confined agent's too, which is not in its run's process group.
		if pids := e2e.Pids(agent); len(pids) > 0 {
			t.Fatalf("stop %d (%v): agents outlived the daemon:\n%s", i, sig, withParents(pids))
		}
	}
	logs, _ := filepath.Glob(in.Layout().DaemonLog() + "*")
	replaced := 0
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bad := errorLines(string(b)); len(bad) > 0 {
			t.Errorf("%s holds error lines:\n%s", f, strings.Join(bad, "\n"))
		}
		replaced += strings.Count(string(b), "the agent started ahead is replaced")
	}
	// The stops came amid swaps: a run of this test that never replaced a
	// standby checked nothing.
	if replaced == 0 {
		t.Error("no agent started ahead was replaced by a reload")
	}
	t.Logf("%d stops, %d standbys replaced by reloads", cycles, replaced)
}

// withParents is what ps says of pids and of their parents.
func withParents(pids []int) string {
	list := ""
	for _, pid := range pids {
		list += fmt.Sprintf("%d,", pid)
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 1 {
				list += f[1] + ","
			}
		}
	}
	out, err := exec.Command("ps", "-o", "pid,ppid,pgid,stat,lstart,args", "-p", strings.TrimSuffix(list, ",")).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("pids %s (ps: %v)", list, err)
	}
	return string(out)
}

// errorLines are the lines of a log that say error or write to a closed
// database.
func errorLines(log string) []string {
	var bad []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "database is closed") || strings.Contains(l, `"level":"error"`) || strings.Contains(l, " ERR ") {
			bad = append(bad, l)
		}
	}
	return bad
}
