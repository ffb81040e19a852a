// Command report reads `go test -bench` output of internal/testkit/bench on stdin
// and prints the figures as a table beside NanoClaw's polling baseline.
// It exits 1 if a benchmark failed or a figure is missing.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// NanoClaw's polling intervals: its message loop every 2 s, its IPC
// watcher every 1 s (and its sandbox alerts ride the IPC poll).
const (
	messagePoll = 2 * time.Second
	ipcPoll     = 1 * time.Second
)

// pollWait is the wait a poll every interval adds to an event arriving
// at a uniformly random moment: p50 half the interval, p99 99% of it.
func pollWait(interval time.Duration) string {
	ms := float64(interval.Milliseconds())
	return fmt.Sprintf("p50 %s ms  p99 %s ms", num(ms*0.5), num(ms*0.99))
}

// figures maps "Benchmark/unit" to its value.
type figures map[string]float64

// parse reads benchmark lines ("BenchmarkX-2  1  123 ns/op  4.5 p50-ms …").
func parse(r io.Reader) (figures, []string, error) {
	f := figures{}
	var failed []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "--- FAIL") || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "panic:") {
			failed = append(failed, line)
		}
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := fields[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		for i := 2; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				f[name+"/"+fields[i+1]] = v
			}
		}
	}
	return f, failed, sc.Err()
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// table writes the report; missing lists the figures not found.
func table(w io.Writer, f figures) (missing []string) {
	get := func(key string) string {
		v, ok := f[key]
		if !ok {
			missing = append(missing, key)
			return "?"
		}
		return num(v)
	}
	count := func(key string) string {
		if _, ok := f[key]; !ok {
			return get(key)
		}
		return strconv.Itoa(int(f[key]))
	}
	pct := func(bench string) string {
		return fmt.Sprintf("p50 %s ms  p99 %s ms", get(bench+"/p50-ms"), get(bench+"/p99-ms"))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "measure\tnanoclawd (this machine)\tNanoClaw, its polling alone\n")
	fmt.Fprintf(tw, "inbound → agent start (confined group)\t%s\t%s (2 s message loop)\n", pct("BenchmarkInboundToAgentStart"), pollWait(messagePoll))
	fmt.Fprintf(tw, "inbound → agent start (main, unconfined)\t%s\t-\n", pct("BenchmarkInboundToMainAgentStart"))
	fmt.Fprintf(tw, "  sandbox start: as the runs' user, seccomp, no nested userns\tp50 %s ms\t-\n", get("BenchmarkSandboxKernelSurface/hardened-p50-ms"))
	fmt.Fprintf(tw, "  sandbox start: as before (daemon's user, no filter)\tp50 %s ms\t-\n", get("BenchmarkSandboxKernelSurface/plain-p50-ms"))
	fmt.Fprintf(tw, "inbound → stored (the channel's 202), with the search index\t%s (mean %s ms)\t-\n", pct("BenchmarkInboundStored"), get("BenchmarkInboundStored/indexed-mean-ms"))
	fmt.Fprintf(tw, "  the same rounds without it, in turns\tp50 %s ms  mean %s ms (indexed/plain %s)\t-\n", get("BenchmarkInboundStored/plain-p50-ms"), get("BenchmarkInboundStored/plain-mean-ms"), get("BenchmarkInboundStored/indexed/plain"))
	fmt.Fprintf(tw, "  indexing, once a burst pauses (not on the inbound path)\t%s µs per message\t-\n", get("BenchmarkInboundStored/index-us/msg"))
	fmt.Fprintf(tw, "IPC file → message sent\t%s\t%s (1 s IPC poll)\n", pct("BenchmarkIPCToSent"), pollWait(ipcPoll))
	fmt.Fprintf(tw, "IPC sustained\t%s files/s\ta burst waits for the next 1 s poll\n", get("BenchmarkIPCThroughput/files/s"))
	fmt.Fprintf(tw, "  daemon CPU per IPC file\t%s µs\t-\n", get("BenchmarkIPCThroughput/cpu-us/file"))
	fmt.Fprintf(tw, "IPC burst of 300 files → last sent\t%s ms\twaits for the next 1 s poll\n", get("BenchmarkIPCBurst300/last-sent-ms"))
	fmt.Fprintf(tw, "violation frame → alert sent\t%s\t%s (alerts ride the IPC poll)\n", pct("BenchmarkViolationToAlert"), pollWait(ipcPoll))
	fmt.Fprintf(tw, "daemon start, 100 groups\tp50 %s ms  max %s ms\t-\n", get("BenchmarkStart100Groups/p50-ms"), get("BenchmarkStart100Groups/max-ms"))
	fmt.Fprintf(tw, "idle wakeups\t%s /s\tat least %s /s (its two poll timers)\n", get("BenchmarkIdle/wakeups/s"), num(1/messagePoll.Seconds()+1/ipcPoll.Seconds()))
	fmt.Fprintf(tw, "idle RSS\t%s MiB\t-\n", get("BenchmarkIdle/rss-MiB"))
	fmt.Fprintf(tw, "  of which the daemon's own (not its program's code)\t%s MiB\t-\n", get("BenchmarkIdle/anon-MiB"))
	fmt.Fprintf(tw, "real SDK: message → API request, cold\t%s\tthe same start-up, after its poll\n", pct("BenchmarkSDKColdMessageToAPI"))
	fmt.Fprintf(tw, "real SDK: message → API request, agent started ahead\t%s\t-\n", pct("BenchmarkSDKWarmMessageToAPI"))
	fmt.Fprintf(tw, "  memory of one agent started ahead\t%s MiB\t-\n", get("BenchmarkSDKWarmMessageToAPI/standby-rss-MiB"))
	fmt.Fprintf(tw, "real SDK: first message after a quiet period longer than idleTimeout, agent started ahead\tp50 %s ms  max %s ms\t-\n",
		get("BenchmarkSDKAfterQuietPeriod/warm-p50-ms"), get("BenchmarkSDKAfterQuietPeriod/warm-max-ms"))
	fmt.Fprintf(tw, "  the same run, a group without one (cold)\tp50 %s ms (warm/cold %s; standby up in %s of 4 samples)\t-\n",
		get("BenchmarkSDKAfterQuietPeriod/cold-p50-ms"), get("BenchmarkSDKAfterQuietPeriod/warm/cold"), count("BenchmarkSDKAfterQuietPeriod/standby-ready"))
	fmt.Fprintf(tw, "  memory of the waiting agent\t%s MiB\t-\n", get("BenchmarkSDKAfterQuietPeriod/standby-rss-MiB"))
	fmt.Fprintf(tw, "real SDK: follow-up → API request\t%s\t+ its 0.5 s input poll\n", pct("BenchmarkSDKFollowUpToAPI"))
	fmt.Fprintf(tw, "real SDK: API answer → reply sent\tp50 %s ms  p99 %s ms\t-\n",
		get("BenchmarkSDKColdMessageToAPI/answer-to-sent-p50-ms"), get("BenchmarkSDKColdMessageToAPI/answer-to-sent-p99-ms"))
	fmt.Fprintf(tw, "  of which result frame → reply sent (nanoclawd)\tp50 %s ms  p99 %s ms\t-\n",
		get("BenchmarkSDKColdMessageToAPI/frame-to-sent-p50-ms"), get("BenchmarkSDKColdMessageToAPI/frame-to-sent-p99-ms"))
	tw.Flush()
	return missing
}

func main() {
	f, failed, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report: read benchmark output:", err)
		os.Exit(1)
	}
	fmt.Println()
	missing := table(os.Stdout, f)
	if len(failed) > 0 || len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "report: benchmarks failed (%s) or figures missing (%s): see the go test output above\n", strings.Join(failed, "; "), strings.Join(missing, ", "))
		os.Exit(1)
	}
}
