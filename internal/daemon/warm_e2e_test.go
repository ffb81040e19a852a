package daemon_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/e2e"
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
