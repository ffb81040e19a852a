// Package bench measures the real nanoclawd binary end to end, through the
// contract's surfaces only: the local channel's socket, IPC files written
// atomically with a run's token, agent frames, and /proc. Each benchmark
// starts its own daemon, takes a fixed number of samples whatever b.N is
// (run with -benchtime 1x), and reports percentiles with b.ReportMetric.
// `make bench` runs them and prints them beside NanoClaw's polling figures
// (internal/testkit/bench/report).
package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// Binaries are built when a benchmark first asks for them, so `go test
// ./...` (no -bench) builds nothing here.
func TestMain(m *testing.M) { e2e.Main(m) }

// agent is one running benchagent, as it introduced itself.
type agent struct {
	folder, token string
	pid           int
	start         time.Time
	conn          net.Conn
	lines         *bufio.Scanner
}

func (a *agent) send(b *testing.B, cmd string) {
	if _, err := fmt.Fprintln(a.conn, cmd); err != nil {
		b.Fatalf("tell agent %s %q: %v", a.folder, cmd, err)
	}
}

// rig is one nanoclawd installation (internal/testkit/e2e) whose agents are
// benchagents that report to it.
type rig struct {
	*e2e.Install
	agents chan *agent
}

// newRig installs nanoclawd with the local channel, benchagent as the
// agent, and the groups main (local:main) plus others g1… (local:gN, no
// trigger); others of them are not main. Its daemon stops with SIGTERM
// (agents get _close).
func newRig(b *testing.B, others int) *rig {
	b.Helper()
	// A short path (Unix sockets are limited to ~108 bytes), which the
	// confined agents may write to.
	sockDir, err := os.MkdirTemp("", "ncb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(sockDir) })
	agentSock := filepath.Join(sockDir, "agents")
	in := e2e.New(b, e2e.Options{
		Agent:      `"command": [` + e2e.Quote(e2e.Bin(b, "internal/testkit/bench/benchagent")) + `], "env": ["BENCH_SOCK"], "timeout": "10m", "idleTimeout": "10m"`,
		Security:   `"allowWrite": [` + e2e.Quote(e2e.Shared(b, sockDir)) + `]`,
		StopSignal: syscall.SIGTERM,
		Wait:       30 * time.Second,
	})
	r := &rig{Install: in, agents: make(chan *agent, 16)}
	ln, err := net.Listen("unix", agentSock)
	if err != nil {
		b.Fatal(err)
	}
	// Confined agents are another user under a root daemon.
	if err := os.Chmod(agentSock, 0o777); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go r.accept(ln)
	in.Env = append(in.Env, "BENCH_SOCK="+agentSock)
	// One `groups import` registers them all (a NanoClaw registered_groups.json).
	no := false
	reg := map[string]any{"local:main": map[string]any{"name": "Main", "folder": "main"}}
	for i := 1; i <= others; i++ {
		reg[fmt.Sprintf("local:g%d", i)] = map[string]any{"name": fmt.Sprintf("G%d", i), "folder": fmt.Sprintf("g%d", i), "requiresTrigger": &no}
	}
	data, _ := json.Marshal(reg)
	file := filepath.Join(in.Dir, "registered_groups.json")
	os.WriteFile(file, data, 0o600)
	in.CLI("groups", "import", file)
	return r
}

func (r *rig) accept(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			sc := bufio.NewScanner(conn)
			if !sc.Scan() {
				conn.Close()
				return
			}
			f := strings.Fields(sc.Text())
			if len(f) != 4 {
				conn.Close()
				return
			}
			pid, _ := strconv.Atoi(f[2])
			ns, _ := strconv.ParseInt(f[3], 10, 64)
			r.agents <- &agent{folder: f[0], token: f[1], pid: pid, start: time.Unix(0, ns), conn: conn, lines: sc}
		}()
	}
}

// nextAgent waits for an agent to start.
func (r *rig) nextAgent() *agent {
	r.TB.Helper()
	select {
	case a := <-r.agents:
		return a
	case <-time.After(30 * time.Second):
		r.TB.Fatal("no agent started within 30 s")
	}
	return nil
}

// ipcFile writes a message file for folder's IPC directory the way the
// MCP tools do, as *.json.tmp; publish renames it to *.json.
func (r *rig) ipcFile(folder, name, chat, text, token string) string {
	dir := filepath.Join(r.Dir, "data", "ipc", folder, "messages")
	os.MkdirAll(dir, 0o700)
	body, _ := json.Marshal(map[string]string{"type": "message", "chatJid": chat, "text": text, "token": token})
	tmp := filepath.Join(dir, name+".json.tmp")
	if err := os.WriteFile(tmp, body, 0o600); err != nil {
		r.TB.Fatal(err)
	}
	return tmp
}

func publish(b *testing.B, tmp string) time.Time {
	t := time.Now()
	if err := os.Rename(tmp, strings.TrimSuffix(tmp, ".tmp")); err != nil {
		b.Fatal(err)
	}
	return t
}

// percentiles reports p50 and p99 of lat in milliseconds.
func percentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), "p99-ms")
}

// BenchmarkInboundToAgentStart: a message POSTed to the local channel →
// the agent process running (its first instruction). It goes through
// storing the message, the queue, building the agent's input and the
// spawn. The groups take turns so that each message finds its group idle.
// The groups are not main, so every start includes building the run's OS
// sandbox and its gateway; BenchmarkInboundToMainAgentStart is the same
// for the main group, which is not confined: the difference is what the
// confinement costs.
func BenchmarkInboundToAgentStart(b *testing.B) {
	inboundToAgentStart(b, 8, func(i int) string { return fmt.Sprintf("g%d", i%8+1) })
}

// BenchmarkInboundToMainAgentStart: inbound → agent start for the main
// group (unconfined).
func BenchmarkInboundToMainAgentStart(b *testing.B) {
	inboundToAgentStart(b, 0, func(int) string { return "main" })
}

func inboundToAgentStart(b *testing.B, groups int, folderOf func(i int) string) {
	const samples = 100
	r := newRig(b, groups)
	r.Start()
	lat := make([]time.Duration, 0, samples)
	b.ResetTimer()
	for i := range samples {
		folder := folderOf(i)
		t0 := time.Now()
		r.Post("local:"+folder, "Bench", "go")
		a := r.nextAgent()
		lat = append(lat, a.start.Sub(t0))
		if a.folder != folder {
			b.Fatalf("agent of %s started, want %s", a.folder, folder)
		}
		a.send(b, "exit")
		for a.lines.Scan() { // until the agent has gone
		}
		a.conn.Close()
	}
	b.StopTimer()
	percentiles(b, lat)
}

// holdMain starts the main group's agent and keeps it running, so its
// token stays current for IPC files.
func holdMain(r *rig) *agent {
	r.Post("local:main", "Bench", "hold")
	a := r.nextAgent()
	if a.folder != "main" || a.token == "" {
		r.TB.Fatalf("agent %s with token %q", a.folder, a.token)
	}
	return a
}

// BenchmarkIPCToSent: one message file at a time, from the rename that
// publishes it to the daemon sending the message (the channel's record of
// the send).
func BenchmarkIPCToSent(b *testing.B) {
	const samples = 200
	r := newRig(b, 0)
	r.Start()
	a := holdMain(r)
	lat := make([]time.Duration, 0, samples)
	b.ResetTimer()
	for i := range samples {
		text := fmt.Sprintf("ipc %d", i)
		t0 := publish(b, r.ipcFile("main", fmt.Sprintf("lat-%04d", i), "local:main", text, a.token))
		m := r.WaitNext("local:main", e2e.Equals(text))
		lat = append(lat, m.At(b).Sub(t0))
	}
	b.StopTimer()
	percentiles(b, lat)
}

// BenchmarkIPCThroughput: 3,000 message files published at once, until
// the last is sent; each must be sent exactly once. A burst this long is
// mostly steady state (a 500-file one was a fifth start-up: the first
// batches, SQLite's statement cache and page cache warming), so its rate
// is the sustained one; BenchmarkIPCBurst300 gives the short burst.
// The daemon's CPU time per file is reported too: unlike the rate, it
// hardly depends on what else the machine is running.
func BenchmarkIPCThroughput(b *testing.B) {
	const files = 3000
	took, cpu := ipcBurst(b, files)
	b.ReportMetric(float64(files)/took.Seconds(), "files/s")
	b.ReportMetric(float64(cpu.Microseconds())/files, "cpu-us/file")
}

// BenchmarkIPCBurst300: 300 message files published at once (an agent
// flushing its queue) → the last of them sent.
func BenchmarkIPCBurst300(b *testing.B) {
	took, _ := ipcBurst(b, 300)
	b.ReportMetric(float64(took.Microseconds())/1000, "last-sent-ms")
}

// ipcBurst publishes files message files to a fresh daemon at once and
// returns the time from the first rename to the last send, and the CPU
// time the daemon spent meanwhile; each must be sent exactly once.
func ipcBurst(b *testing.B, files int) (took, cpu time.Duration) {
	r := newRig(b, 0)
	stat := fmt.Sprintf("/proc/%d/stat", r.Start().Cmd.Process.Pid)
	a := holdMain(r)
	tmps := make([]string, files)
	for i := range files {
		tmps[i] = r.ipcFile("main", fmt.Sprintf("tp-%04d", i), "local:main", fmt.Sprintf("tp %d", i), a.token)
	}
	b.ResetTimer()
	cpu0 := cpuTime(b, stat)
	t0 := time.Now()
	for _, tmp := range tmps {
		publish(b, tmp)
	}
	seen := map[string]bool{}
	var last time.Time
	for len(seen) < files {
		m := r.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "tp ") })
		if seen[m.Text] {
			b.Fatalf("%q sent twice", m.Text)
		}
		seen[m.Text] = true
		if at := m.At(b); at.After(last) {
			last = at
		}
	}
	b.StopTimer()
	return last.Sub(t0), cpuTime(b, stat) - cpu0
}

// cpuTime is the user plus system time of the process whose
// /proc/<pid>/stat is at path (all its threads); zero where there is no
// /proc.
func cpuTime(b *testing.B, path string) time.Duration {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// Fields after the ")" that ends the command name: utime and stime
	// are the 12th and 13th, in clock ticks of 1/100 s.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("%s: %q", path, data)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// BenchmarkViolationToAlert: a non-main agent writes a violation frame →
// the [SANDBOX ALERT] is sent to the main group. Each sample is the first
// alert of another group: one group brings at most alerts.MaxPerMinute
// alerts a minute to the main chat, and the rest are rightly folded into a
// summary, which is not what this measures.
func BenchmarkViolationToAlert(b *testing.B) {
	const samples = 50
	r := newRig(b, samples)
	r.Start()
	lat := make([]time.Duration, 0, samples)
	b.ResetTimer()
	for i := 1; i <= samples; i++ {
		r.Post(fmt.Sprintf("local:g%d", i), "Bench", "hold")
		a := r.nextAgent()
		if a.folder != fmt.Sprintf("g%d", i) {
			b.Fatalf("agent of %s started, want g%d's", a.folder, i)
		}
		target := fmt.Sprintf("h%d.bench.example", i)
		a.send(b, "violation "+target)
		if !a.lines.Scan() {
			b.Fatal("agent gone")
		}
		ns, _ := strconv.ParseInt(a.lines.Text(), 10, 64)
		m := r.WaitNext("local:main", func(s string) bool {
			return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, target)
		})
		lat = append(lat, m.At(b).Sub(time.Unix(0, ns)))
		a.send(b, "exit") // its slot is free for the next group's
	}
	b.StopTimer()
	percentiles(b, lat)
}

// BenchmarkStart100Groups: from exec to ready (see e2e.Install.Start) with 100
// registered groups, over a few cold starts with SIGTERM between them.
func BenchmarkStart100Groups(b *testing.B) {
	const samples = 5
	r := newRig(b, 99)
	lat := make([]time.Duration, 0, samples)
	b.ResetTimer()
	for range samples {
		p := r.Start()
		lat = append(lat, p.Ready)
		p.Stop()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// BenchmarkIdle: the daemon with 100 groups and nothing to do. Wakeups are
// the voluntary context switches of all its threads (each wakeup ends in
// one) over the window, from /proc/<pid>/task/*/status; RSS is VmRSS.
func BenchmarkIdle(b *testing.B) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("needs /proc")
	}
	const settle, window = 2 * time.Second, 5 * time.Second
	r := newRig(b, 99)
	pid := r.Start().Cmd.Process.Pid
	// Measuring needs the daemon left alone for a while: a fixed window
	// is the measurement, not a wait for something to happen.
	time.Sleep(settle)
	b.ResetTimer()
	before := switches(b, pid)
	time.Sleep(window)
	after := switches(b, pid)
	b.StopTimer()
	rss := status(b, fmt.Sprintf("/proc/%d/status", pid), "VmRSS")
	// RssAnon is the daemon's own memory (heap, stacks, SQLite's caches);
	// the rest of VmRSS is its program's code and read-only data mapped
	// from the page cache, which some kernels map in whole 2 MiB folios.
	anon := status(b, fmt.Sprintf("/proc/%d/status", pid), "RssAnon")
	var woke int64
	for tid, n := range after {
		woke += n - before[tid] // a thread born in the window counts from 0
	}
	b.ReportMetric(float64(woke)/window.Seconds(), "wakeups/s")
	b.ReportMetric(float64(rss)/1024, "rss-MiB")
	b.ReportMetric(float64(anon)/1024, "anon-MiB")
}

// switches is voluntary_ctxt_switches of each thread of pid.
func switches(b *testing.B, pid int) map[string]int64 {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int64{}
	for _, t := range tasks {
		out[t.Name()] = status(b, fmt.Sprintf("/proc/%d/task/%s/status", pid, t.Name()), "voluntary_ctxt_switches")
	}
	return out
}

// status reads one numeric field ("VmRSS:  1234 kB" → 1234) of a status file.
func status(b *testing.B, path, field string) int64 {
	body, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			if err != nil {
				b.Fatalf("%s %s: %v", path, field, err)
			}
			return n
		}
	}
	b.Fatalf("%s has no %s", path, field)
	return 0
}
