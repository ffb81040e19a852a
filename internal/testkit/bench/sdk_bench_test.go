package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/sandbox"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// The reply path with the real agent runner and Claude Agent SDK, against
// a local mock of the Messages API that answers at once: what a user waits
// for beyond the model itself.

const sdkSamples = 10

// sdkRig is an installation whose agents are the real agent runner.
type sdkRig struct {
	*e2e.Install
	mock *mockapi.Server
}

func newSDKRig(b *testing.B, warm int, groups int) *sdkRig {
	return newSDKRigIdle(b, warm, groups, "5m")
}

// newSDKRigIdle is newSDKRig with agent.idleTimeout set to idle.
func newSDKRigIdle(b *testing.B, warm int, groups int, idle string) *sdkRig {
	b.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		b.Fatal(err)
	}
	runner := filepath.Join(root, "agent-runner", "dist", "index.js")
	if _, err := os.Stat(filepath.Join(root, "agent-runner", "node_modules", "@anthropic-ai", "claude-agent-sdk")); err != nil {
		b.Skip("agent-runner/node_modules is missing: run `make build`")
	}
	if _, err := os.Stat(runner); err != nil {
		b.Skip("agent-runner/dist/index.js is missing: run `make build`")
	}
	mock := mockapi.New(b)
	in := e2e.New(b, e2e.Options{
		Agent: fmt.Sprintf(`"command": ["node", %s], "warm": %d, "timeout": "5m", "idleTimeout": %q, "maxConcurrent": 8,
			"env": ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"]`, e2e.Quote(runner), warm, idle),
		Env:        []string{"ANTHROPIC_API_KEY=sk-ant-bench", "ANTHROPIC_BASE_URL=" + mock.URL, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"},
		StopSignal: os.Interrupt,
		Wait:       2 * time.Minute,
	})
	in.AddGroup("local:main", "main", "--main")
	for i := 1; i <= groups; i++ {
		in.AddGroup(fmt.Sprintf("local:g%d", i), fmt.Sprintf("g%d", i), "--no-trigger")
	}
	in.Start()
	return &sdkRig{Install: in, mock: mock}
}

// requestWith waits for the first Messages API request whose body holds
// marker and returns when it arrived.
func (r *sdkRig) requestWith(b *testing.B, marker string) time.Time {
	b.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		for _, req := range r.mock.Log() {
			if req.Path == "/v1/messages" && strings.Contains(string(req.Body), marker) {
				return req.At
			}
		}
	}
	b.Fatalf("no API request carried %q", marker)
	return time.Time{}
}

// ask posts a message with a unique marker and returns the latencies to
// the first API request that carries it, from the last API request to
// the reply sent, and from the agent's result frame (as the run log
// stamps it) to the reply sent: the daemon's own part.
func (r *sdkRig) ask(b *testing.B, chat, text string) (toAPI, answerToSent, frameToSent time.Duration) {
	b.Helper()
	t0 := time.Now()
	r.Post(chat, "Bench", text)
	at := r.requestWith(b, text)
	sent := r.WaitNext(chat, func(s string) bool { return s != "" })
	var last time.Time
	for _, req := range r.mock.Log() {
		if req.Path == "/v1/messages" && req.At.After(last) {
			last = req.At
		}
	}
	sentAt := sent.At(b)
	return at.Sub(t0), sentAt.Sub(last), sentAt.Sub(r.lastResultFrame(b, strings.TrimPrefix(chat, "local:"), sentAt))
}

// lastResultFrame is when the newest run log of folder recorded its last
// result frame (the log stamps UTC times of day).
func (r *sdkRig) lastResultFrame(b *testing.B, folder string, day time.Time) time.Time {
	logs, _ := filepath.Glob(filepath.Join(r.Dir, "groups", folder, "logs", "agent-*.log"))
	if len(logs) == 0 {
		b.Fatalf("no run log for %s", folder)
	}
	slices.Sort(logs)
	data, _ := os.ReadFile(logs[len(logs)-1])
	var stamp string
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, "frame: result") {
			stamp, _, _ = strings.Cut(line, " ")
		}
	}
	tod, err := time.Parse("15:04:05.000", stamp)
	if err != nil {
		b.Fatalf("run log of %s: no result frame stamp (%q)", folder, stamp)
	}
	d := day.UTC()
	return time.Date(d.Year(), d.Month(), d.Day(), tod.Hour(), tod.Minute(), tod.Second(), tod.Nanosecond(), time.UTC)
}

// BenchmarkSDKColdMessageToAPI: a message to a group with no agent
// running and none started ahead → the model API's first request for it.
// Also reports the API's answer → the reply handed to the channel.
func BenchmarkSDKColdMessageToAPI(b *testing.B) {
	r := newSDKRig(b, 0, sdkSamples)
	var toAPI, toSent, frameToSent []time.Duration
	b.ResetTimer()
	for i := 1; i <= sdkSamples; i++ {
		a, s, f := r.ask(b, fmt.Sprintf("local:g%d", i), fmt.Sprintf("cold-%d-%d", i, time.Now().UnixNano()))
		toAPI, toSent, frameToSent = append(toAPI, a), append(toSent, s), append(frameToSent, f)
	}
	b.StopTimer()
	percentiles(b, toAPI)
	b.ReportMetric(ms(pct(toSent, 50)), "answer-to-sent-p50-ms")
	b.ReportMetric(ms(pct(toSent, 99)), "answer-to-sent-p99-ms")
	b.ReportMetric(ms(pct(frameToSent, 50)), "frame-to-sent-p50-ms")
	b.ReportMetric(ms(pct(frameToSent, 99)), "frame-to-sent-p99-ms")
}

// BenchmarkSDKWarmMessageToAPI: the same for a group with an agent started
// ahead (agent.warm). Each sample waits for the next standby to boot.
func BenchmarkSDKWarmMessageToAPI(b *testing.B) {
	r := newSDKRig(b, 1, 1)
	r.ask(b, "local:g1", fmt.Sprintf("first-%d", time.Now().UnixNano())) // the group becomes the most recent
	var toAPI []time.Duration
	var rss int64
	b.ResetTimer()
	for i := 1; i <= sdkSamples; i++ {
		b.StopTimer()
		time.Sleep(6 * time.Second) // the standby boots (node and the SDK's CLI)
		rss = max(rss, r.standbyRSS(b, "g1"))
		b.StartTimer()
		a, _, _ := r.ask(b, "local:g1", fmt.Sprintf("warm-%d-%d", i, time.Now().UnixNano()))
		toAPI = append(toAPI, a)
	}
	b.StopTimer()
	percentiles(b, toAPI)
	b.ReportMetric(float64(rss)/(1<<20), "standby-rss-MiB")
}

// BenchmarkSDKAfterQuietPeriod: the first message after a quiet period
// four times agent.idleTimeout (3 s), for a group with an agent started
// ahead and, in the same run, for a group without one (cold). Each sample
// primes g1 (the most recent group gets the standby), waits the quiet
// period, asks g1, then a group not asked before. Also reports the memory
// of the waiting standby.
func BenchmarkSDKAfterQuietPeriod(b *testing.B) {
	const samples, idle = 4, 3 * time.Second
	r := newSDKRigIdle(b, 1, samples+1, idle.String())
	var warm, cold []time.Duration
	var rss int64
	ready := 0 // samples whose standby was up when the message came (a loaded machine boots it late)
	b.ResetTimer()
	for i := 1; i <= samples; i++ {
		b.StopTimer()
		r.ask(b, "local:g1", fmt.Sprintf("prime-%d-%d", i, time.Now().UnixNano()))
		time.Sleep(4 * idle) // the quiet period, longer than idleTimeout
		m := r.standbyRSS(b, "g1")
		if m > 0 {
			rss, ready = max(rss, m), ready+1
		}
		b.StartTimer()
		w, _, _ := r.ask(b, "local:g1", fmt.Sprintf("warm-%d-%d", i, time.Now().UnixNano()))
		c, _, _ := r.ask(b, fmt.Sprintf("local:g%d", i+1), fmt.Sprintf("cold-%d-%d", i, time.Now().UnixNano()))
		warm, cold = append(warm, w), append(cold, c)
		b.Logf("sample %d: standby up %t, with it %s, cold %s", i, m > 0, w.Round(time.Millisecond), c.Round(time.Millisecond))
	}
	b.StopTimer()
	b.ReportMetric(ms(pct(warm, 50)), "warm-p50-ms")
	b.ReportMetric(ms(pct(warm, 99)), "warm-max-ms")
	b.ReportMetric(ms(pct(cold, 50)), "cold-p50-ms")
	b.ReportMetric(float64(pct(warm, 50))/float64(pct(cold, 50)), "warm/cold")
	b.ReportMetric(float64(rss)/(1<<20), "standby-rss-MiB")
	b.ReportMetric(float64(ready), "standby-ready")
}

// standbyRSS is the resident memory of the sandbox (bubblewrap and all in
// it) that runs folder's agent.
func (r *sdkRig) standbyRSS(b *testing.B, folder string) int64 {
	dir := filepath.Join(r.Dir, "groups", folder)
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmdlines {
		data, _ := os.ReadFile(c)
		args := strings.Split(string(data), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "bwrap" && slices.Contains(args, dir) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(c)))
			_, rss := sandbox.Tree(pid)
			return rss
		}
	}
	b.Logf("no sandbox runs %s's agent", folder)
	return 0
}

// BenchmarkSDKFollowUpToAPI: a message for a group whose agent is running
// (handed to it as a follow-up) → the API request for it.
func BenchmarkSDKFollowUpToAPI(b *testing.B) {
	r := newSDKRig(b, 0, 1)
	r.ask(b, "local:g1", fmt.Sprintf("start-%d", time.Now().UnixNano()))
	var toAPI []time.Duration
	b.ResetTimer()
	for i := 1; i <= sdkSamples; i++ {
		a, _, _ := r.ask(b, "local:g1", fmt.Sprintf("follow-%d-%d", i, time.Now().UnixNano()))
		toAPI = append(toAPI, a)
	}
	b.StopTimer()
	percentiles(b, toAPI)
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
