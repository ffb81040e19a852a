package main

import (
	"bytes"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkInboundToAgentStart-2   	       1	1138761897 ns/op	         8.976 p50-ms	        17.27 p99-ms
BenchmarkInboundToMainAgentStart-2 	       1	1038761897 ns/op	         3.412 p50-ms	        9.1 p99-ms
BenchmarkSandboxKernelSurface-2 	       1	 10501657673 ns/op	       6.21 hardened-p50-ms	       5.17 plain-p50-ms
BenchmarkInboundStored-2 1 1 ns/op 0.9 indexed-mean-ms 0.85 plain-mean-ms 0.75 plain-p50-ms 1.06 indexed/plain 0.8 p50-ms 2.1 p99-ms 40 index-us/msg
BenchmarkIPCToSent-2             	       1	 458710527 ns/op	         0.8060 p50-ms	         5.956 p99-ms
BenchmarkIPCThroughput-2         	       1	 448043567 ns/op	      1117 files/s	       210.0 cpu-us/file
BenchmarkIPCBurst300-2           	       1	 448043567 ns/op	       61.5 last-sent-ms
BenchmarkViolationToAlert-2      	       1	 270543116 ns/op	         1.526 p50-ms	        13.98 p99-ms
BenchmarkStart100Groups-2        	       1	 420682344 ns/op	       101.6 max-ms	        54.39 p50-ms
BenchmarkIdle-2                  	       1	5009789132 ns/op	        30.70 rss-MiB	         0 wakeups/s	 6.4 anon-MiB
BenchmarkSDKColdMessageToAPI-2 1 1 ns/op 2800 p50-ms 3100 p99-ms 18 answer-to-sent-p50-ms 25 answer-to-sent-p99-ms 2 frame-to-sent-p50-ms 4 frame-to-sent-p99-ms
BenchmarkSDKWarmMessageToAPI-2 1 1 ns/op 250 p50-ms 300 p99-ms 310 standby-rss-MiB
BenchmarkSDKFollowUpToAPI-2 1 1 ns/op 120 p50-ms 200 p99-ms
BenchmarkSDKAfterQuietPeriod-2 1 1 ns/op 40 warm-p50-ms 55 warm-max-ms 1000 cold-p50-ms 0.04 warm/cold 350 standby-rss-MiB 4 standby-ready
PASS
`

func TestTable(t *testing.T) {
	f, failed, err := parse(strings.NewReader(sample))
	if err != nil || len(failed) > 0 {
		t.Fatal(err, failed)
	}
	var out bytes.Buffer
	if missing := table(&out, f); len(missing) > 0 {
		t.Errorf("missing %v", missing)
	}
	for _, want := range []string{
		"p50 8.98 ms  p99 17.3 ms", "p50 6.21 ms", "p50 5.17 ms", "p50 1000 ms  p99 1980 ms (2 s message loop)", "p50 3.41 ms  p99 9.10 ms",
		"p50 0.81 ms  p99 5.96 ms", "p50 500 ms  p99 990 ms (1 s IPC poll)",
		"1117 files/s", "indexed/plain 1.06", "210 µs", "p50 1000 ms (warm/cold 0.04; standby up in 4 of 4 samples)", "61.5 ms", "p50 54.4 ms  max 102 ms", "0.00 /s", "at least 1.50 /s", "30.7 MiB", "6.40 MiB",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestFailureAndMissing(t *testing.T) {
	f, failed, _ := parse(strings.NewReader("--- FAIL: BenchmarkIdle\nBenchmarkIPCThroughput-2 1 5 ns/op 10 files/s\nFAIL\n"))
	if len(failed) != 2 {
		t.Errorf("failed %q", failed)
	}
	if missing := table(&bytes.Buffer{}, f); len(missing) != 41 {
		t.Errorf("missing %v", missing)
	}
}
