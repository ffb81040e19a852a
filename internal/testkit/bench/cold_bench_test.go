package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// The cold path against the SDK's own floor: the main group's message,
// with no agent running and none started ahead, → the model API's first
// request for it, against a bare Node script calling the SDK's query()
// with the same prompt → its first request, on the same Node (bin/node),
// SDK and mock API. The two are measured alternately in one run, so a
// machine slowed by others slows both alike.

// bareScript is query() as the agent runner calls it for the main group
// (the prompt as a stream of user messages, the main group's options, as
// 'security show main' prints them), against the mock
// (ANTHROPIC_BASE_URL), until its first result; without the runner's
// hooks, MCP server and IPC.
const bareScript = `import { query } from %q;
async function* prompt() {
  yield { type: "user", message: { role: "user", content: process.argv[2] }, parent_tool_use_id: null, session_id: "" };
}
const options = { cwd: process.argv[3], permissionMode: "bypassPermissions", allowDangerouslySkipPermissions: true,
  sandbox: { enabled: false }, settingSources: ["user", "project"] };
for await (const m of query({ prompt: prompt(), options })) {
  if (m.type === "result") break;
}
`

func BenchmarkSDKColdVsBareSDK(b *testing.B) {
	const samples, idle = 8, 2 * time.Second
	r := newSDKRigIdle(b, 0, 0, idle.String())
	root, _ := filepath.Abs("../../..")
	sdk := filepath.Join(root, "agent-runner", "node_modules", "@anthropic-ai", "claude-agent-sdk", "sdk.mjs")
	script := filepath.Join(b.TempDir(), "bare.mjs")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(bareScript, "file://"+sdk)), 0o644); err != nil {
		b.Fatal(err)
	}
	node := e2e.Node(b)
	// What the agent's process runs, to wait for its end: without it every
	// sample after the first would find the agent still up, and measure a
	// follow-up instead of a cold start.
	real, err := exec.LookPath(node)
	if err == nil {
		real, err = filepath.EvalSymlinks(real)
	}
	if err != nil {
		b.Fatalf("find the node the agents run on (%s): %v", node, err)
	}
	b.Logf("node: %s (%s)", node, real)
	bareDir := b.TempDir()
	bare := func(marker string) time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, script, marker, bareDir)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + bareDir, "ANTHROPIC_API_KEY=sk-ant-bench",
			"ANTHROPIC_BASE_URL=" + r.mock.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "IS_SANDBOX=1"}
		t0 := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("bare SDK script: %v\n%s", err, out)
		}
		return r.requestWith(b, marker).Sub(t0)
	}
	// The main group's agent ends idle after idle: each sample waits for
	// it, so that every message starts one cold.
	noAgent := func() {
		for deadline := time.Now().Add(time.Minute); len(e2e.Pids(real)) > 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatal("the main group's agent did not end")
			}
		}
	}
	r.ask(b, "local:main", fmt.Sprintf("prime-%d", time.Now().UnixNano())) // the first start fills the OS's caches for both
	var ours, floor []time.Duration
	b.ResetTimer()
	for i := range samples {
		b.StopTimer()
		noAgent()
		b.StartTimer()
		a, _, _ := r.ask(b, "local:main", fmt.Sprintf("cold-%d-%d", i, time.Now().UnixNano()))
		f := bare(fmt.Sprintf("bare-%d-%d", i, time.Now().UnixNano()))
		ours, floor = append(ours, a), append(floor, f)
		b.Logf("sample %d: daemon %s, bare SDK %s", i, a.Round(time.Millisecond), f.Round(time.Millisecond))
	}
	b.StopTimer()
	b.ReportMetric(ms(pct(ours, 50)), "daemon-p50-ms")
	b.ReportMetric(ms(pct(floor, 50)), "bare-sdk-p50-ms")
	b.ReportMetric(float64(pct(ours, 50))/float64(pct(floor, 50)), "daemon/bare")
}
