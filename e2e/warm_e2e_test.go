package e2e_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// With agent.warm, a group that just had a run gets an agent started
// ahead; the next message is answered by it (its stdin says standby and
// the prompt came as its first input). After a policy change no agent
// started with the old policy answers: the standby is replaced (or, if the
// message is faster, a fresh agent starts).
func TestWarmAgentAnswersAndIsReplacedOnPolicyChange(t *testing.T) {
	agent := e2e.Testagent(t)
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(agent) + `], "warm": 1`})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	in.Post("local:family", "Ann", "echo one")
	in.WaitFor("local:family", e2e.Equals("echo: one"))
	// A standby is the one agent running, and its run log shows it started
	// without a prompt and has answered nothing yet.
	waitStandby := func() {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			logs, _ := filepath.Glob(filepath.Join(in.Dir, "groups", "family", "logs", "agent-*.log"))
			slices.Sort(logs)
			if len(logs) > 0 && e2e.CountProcs(agent) == 1 {
				if b, _ := os.ReadFile(logs[len(logs)-1]); strings.Contains(string(b), "prompt=0B") && strings.Contains(string(b), "runner: pid ") &&
					!strings.Contains(string(b), "frame: result") {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no agent was started ahead (%d running)", e2e.CountProcs(agent))
			}
		}
	}
	waitStandby()
	in.Post("local:family", "Ann", "stdin")
	if got := in.WaitNext("local:family", func(s string) bool { return strings.Contains(s, `"groupFolder":"family"`) }).Text; !strings.Contains(got, `"standby":true`) {
		t.Fatalf("the message was not answered by the agent started ahead:\n%s", got)
	}

	waitStandby()
	override := filepath.Join(t.TempDir(), "o.json")
	os.WriteFile(override, []byte(`{"tools": ["Read"]}`), 0o600)
	in.CLI("groups", "set-security", "family", "--file", override)
	in.Post("local:family", "Ann", "stdin")
	m := in.WaitNext("local:family", func(s string) bool { return strings.Contains(s, `"groupFolder":"family"`) })
	if !strings.Contains(m.Text, `"tools":["Read","mcp__nanoclaw__*"]`) {
		t.Errorf("an agent started with the old policy answered after the change:\n%s", m.Text)
	}
}

// A standby is not under agent.idleTimeout: after a quiet period several
// times longer, the same standby answers the next message. One that is
// killed is started again.
func TestWarmStandbyOutlastsIdleTimeoutAndComesBack(t *testing.T) {
	agent := e2e.Testagent(t)
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(agent) + `], "warm": 1, "idleTimeout": "1s", "timeout": "60s"`})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	in.Post("local:family", "Ann", "echo one")
	in.WaitFor("local:family", e2e.Equals("echo: one"))
	standby := func(what string, after time.Time) time.Time {
		t.Helper()
		rep := statusUntil(t, in, what, func(r status.Report) bool {
			g := group(r, "family")
			return g.Agent == "standby" && g.StandbySince != nil && g.StandbySince.After(after)
		})
		return *group(rep, "family").StandbySince
	}
	first := standby("a standby", time.Time{})
	time.Sleep(4 * time.Second) // the quiet period: four idle timeouts
	if again := standby("the standby after the quiet period", time.Time{}); !again.Equal(first) {
		t.Fatalf("the standby was replaced during the quiet period (started %s, now %s)", first, again)
	}
	in.Post("local:family", "Ann", "stdin")
	if got := in.WaitNext("local:family", func(s string) bool { return strings.Contains(s, `"groupFolder":"family"`) }).Text; !strings.Contains(got, `"standby":true`) {
		t.Fatalf("after the quiet period the message was not answered by the agent started ahead:\n%s", got)
	}

	// Killed while it waits: another one is started.
	second := standby("the next standby", first)
	var pids []int
	for deadline := time.Now().Add(30 * time.Second); len(pids) == 0; pids = e2e.Pids(agent) {
		if time.Now().After(deadline) {
			t.Fatal("the standby's agent never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	standby("a standby started again after a kill", second)
	in.Post("local:family", "Ann", "echo two")
	in.WaitFor("local:family", e2e.Equals("echo: two"))
}

// An agent command that answers without waiting for its prompt is not
// kept warm: the log says so once and no agent is started ahead again.
func TestWarmNotKeptForACommandThatDoesNotWait(t *testing.T) {
	script := filepath.Join(t.TempDir(), "agent.sh")
	os.WriteFile(script, []byte("#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' '---NANOCLAW_OUTPUT_START---' '{\"status\":\"success\",\"result\":\"done\"}' '---NANOCLAW_OUTPUT_END---'\n"), 0o755)
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(script) + `], "warm": 1`})
	in.AddGroup("local:main", "main", "--main")
	proc := in.Start()
	const line = "answered or exited before it was given a prompt"
	in.Post("local:main", "Ann", "one")
	in.WaitFor("local:main", e2e.Equals("done"))
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(proc.Out.String(), line); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon never said the command is not kept warm:\n%s", proc.Out.String())
		}
	}
	in.Post("local:main", "Ann", "two")
	in.WaitNext("local:main", e2e.Equals("done"))
	statusUntil(t, in, "the run's end", func(r status.Report) bool { return group(r, "main").Agent == "idle" })
	time.Sleep(time.Second) // room for a wrongly started standby to show
	logs, _ := filepath.Glob(filepath.Join(in.Dir, "groups", "main", "logs", "agent-*.log"))
	if len(logs) != 3 || strings.Count(proc.Out.String(), line) != 1 {
		t.Fatalf("%d run logs (want 2 runs and 1 standby), %d log lines:\n%s", len(logs), strings.Count(proc.Out.String(), line), proc.Out.String())
	}
}

// Attack: an agent that never answers and ignores SIGTERM, with timeout
// 3 s and idleTimeout 2 s. The idle path's 30 s grace does not postpone the
// hard limit: it is gone long before that, and the group answers the next
// message.
func TestHardTimeoutEndsAnAgentThatNeverAnswers(t *testing.T) {
	agent := e2e.Testagent(t)
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(agent) + `], "timeout": "3s", "idleTimeout": "2s"`})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	t0 := time.Now()
	in.Post("local:family", "Ann", "hang")
	for deadline := time.Now().Add(30 * time.Second); e2e.CountProcs(agent) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the agent never started")
		}
	}
	// A generous deadline, well short of the 30 s grace that used to
	// postpone the limit (the contract's bound is 11 s).
	for deadline := t0.Add(20 * time.Second); e2e.CountProcs(agent) != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent still runs %s after the message", time.Since(t0).Round(time.Millisecond))
		}
	}
	t.Logf("gone %s after the message", time.Since(t0).Round(time.Millisecond))
	in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "could not answer") })
	in.Post("local:family", "Ann", "echo after")
	in.WaitFor("local:family", e2e.Equals("echo: after"))
}

// A standby waits agent.warmFor for its first prompt, then it is stopped
// and not started again until its group speaks; the message that comes
// later is answered (cold) and the group gets a standby again.
func TestWarmStandbyEndsAfterWarmFor(t *testing.T) {
	agent := e2e.Testagent(t)
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(agent) + `], "warm": 1, "warmFor": "3s"`})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Ann", "echo one")
	in.WaitFor("local:main", e2e.Equals("echo: one"))
	statusUntil(t, in, "a standby", func(r status.Report) bool { return group(r, "main").Agent == "standby" })
	statusUntil(t, in, "the standby's end after agent.warmFor", func(r status.Report) bool { return group(r, "main").Agent == "idle" })
	e2e.WaitNoProcs(t, agent, "standbys after agent.warmFor")
	in.Post("local:main", "Ann", "echo two")
	in.WaitNext("local:main", e2e.Equals("echo: two"))
	statusUntil(t, in, "a standby after the group spoke again", func(r status.Report) bool { return group(r, "main").Agent == "standby" })
}
