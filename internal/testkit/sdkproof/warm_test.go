package sdkproof

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// The acceptance check of warm agents with the real SDK: agent.warm 1,
// idleTimeout 3 s. After its first answer the group is quiet for 12 s —
// four idle timeouts — and its next message is still taken by the agent
// started ahead: the run log of an agent started without a prompt shows it
// given one and answering. How much sooner that reaches the model than a
// cold start is measured by `make bench` (BenchmarkSDKAfterQuietPeriod),
// not asserted here; the test logs both.
func TestDaemonWarmAgentAfterAQuietPeriod(t *testing.T) {
	w := newWorld(t) // skips without agent-runner/node_modules or bwrap
	mock := mockapi.New(t)
	dumpOnFailure(t, w, mock)
	in := newDaemonInstall(t, w, mock.URL, `"warm": 1`)
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.AddGroup("local:cold", "cold", "--no-trigger")
	in.Start()
	in.Post("local:family", "Ann", "good morning")
	in.WaitFor("local:family", e2e.Equals("ok"))
	time.Sleep(12 * time.Second) // the quiet period

	toAPI := func(chat string) time.Duration {
		t.Helper()
		marker := fmt.Sprintf("MARK-%s-%d", strings.TrimPrefix(chat, "local:"), time.Now().UnixNano())
		t0 := time.Now()
		in.Post(chat, "Ann", marker)
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			for _, req := range mock.Log() {
				if req.Path == "/v1/messages" && strings.Contains(string(req.Body), marker) {
					in.WaitNext(chat, e2e.Equals("ok"))
					return req.At.Sub(t0)
				}
			}
		}
		t.Fatalf("no API request carried %s", marker)
		return 0
	}
	warm := toAPI("local:family")
	cold := toAPI("local:cold")
	t.Logf("message → first API request after the quiet period: with a standby %s, cold %s", warm.Round(time.Millisecond), cold.Round(time.Millisecond))

	logs, _ := filepath.Glob(filepath.Join(w.groups, "family", "logs", "agent-*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if s := string(b); strings.Contains(s, "prompt=0B") && strings.Contains(s, "given its first prompt") && strings.Contains(s, "frame: result") {
			return
		}
	}
	t.Fatalf("no agent started ahead answered family's message after the quiet period (%d run logs)", len(logs))
}
