// Command benchagent is the agent the benchmarks in internal/testkit/bench run in
// place of the real agent runner. At start it connects to $BENCH_SOCK and
// says who it is (group folder, IPC token, PID, start time in Unix ns);
// then it does what the benchmark tells it, one command a line:
//
//	exit              print a success frame with a null result, exit 0
//	violation TARGET  print a network violation frame for TARGET and answer
//	                  with the time it was written (Unix ns)
//
// It exits 0 when input/_close appears or the benchmark hangs up.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/layout"
	"github.com/nanoclawd/nanoclawd/internal/protocol"
)

func main() {
	start := time.Now()
	conn, err := net.Dial("unix", os.Getenv("BENCH_SOCK"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchagent:", err)
		os.Exit(2)
	}
	fmt.Fprintf(conn, "%s %s %d %d\n", os.Getenv(protocol.EnvGroupFolder), os.Getenv(protocol.EnvIPCToken), os.Getpid(), start.UnixNano())
	io.Copy(io.Discard, os.Stdin)
	go func() {
		closeFile := layout.IPCDir(os.Getenv(protocol.EnvIPCDir)).Close()
		for {
			if _, err := os.Stat(closeFile); err == nil {
				os.Exit(0)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		switch cmd {
		case "exit":
			protocol.WriteFrame(os.Stdout, protocol.Frame{Status: protocol.StatusSuccess})
			os.Exit(0)
		case "violation":
			frame, _ := protocol.EncodeFrame(protocol.ViolationFrame(protocol.Violation{Kind: "network", Tool: "Bash", Target: arg, Detail: "benchmark"}))
			t := time.Now()
			os.Stdout.Write(frame)
			fmt.Fprintf(conn, "%d\n", t.UnixNano())
		}
	}
}
