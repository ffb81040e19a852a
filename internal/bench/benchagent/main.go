// Command benchagent is the agent the benchmarks in internal/bench run in
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
	"path/filepath"
	"strings"
	"time"
)

const (
	frameStart = "---NANOCLAW_OUTPUT_START---"
	frameEnd   = "---NANOCLAW_OUTPUT_END---"
)

func main() {
	start := time.Now()
	conn, err := net.Dial("unix", os.Getenv("BENCH_SOCK"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchagent:", err)
		os.Exit(2)
	}
	fmt.Fprintf(conn, "%s %s %d %d\n", os.Getenv("NANOCLAW_GROUP_FOLDER"), os.Getenv("NANOCLAW_IPC_TOKEN"), os.Getpid(), start.UnixNano())
	io.Copy(io.Discard, os.Stdin)
	go func() {
		closeFile := filepath.Join(os.Getenv("NANOCLAW_IPC_DIR"), "input", "_close")
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
			fmt.Printf("%s\n{\"status\":\"success\",\"result\":null}\n%s\n", frameStart, frameEnd)
			os.Exit(0)
		case "violation":
			frame := fmt.Sprintf("%s\n{\"type\":\"violation\",\"kind\":\"network\",\"tool\":\"Bash\",\"target\":%q,\"detail\":\"benchmark\"}\n%s\n", frameStart, arg, frameEnd)
			t := time.Now()
			os.Stdout.WriteString(frame)
			fmt.Fprintf(conn, "%d\n", t.UnixNano())
		}
	}
}
