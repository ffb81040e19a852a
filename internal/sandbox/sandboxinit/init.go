// Package sandboxinit is the first process inside a confined run's
// sandbox (nanoclawd-init, or nanoclawd sandbox-init). It imports the
// standard library alone: every confined start runs its package
// initialisation, and package sandbox's (the seccomp compiler, the
// policy) cost about 0.7 ms of CPU there.
package sandboxinit

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// Main is `nanoclawd sandbox-init`, the first process inside a run's
// sandbox. It sets the run's limits, serves the gateway socket on a
// loopback port (the sandbox has no other network), points the agent's
// proxy and model-API variables at it, then runs the agent and exits with
// its status. On Linux it is pid 1 of the sandbox's PID namespace
// (bubblewrap's --as-pid-1): it reaps what the agent's processes leave,
// and when it exits the kernel ends every process in the sandbox — an
// escaped background command too — before bubblewrap, the daemon's
// child, learns that it exited.
func Main(args []string) int {
	fs := flag.NewFlagSet("sandbox-init", flag.ContinueOnError)
	nproc := fs.Int("nproc", 0, "most processes the run may have")
	fsize := fs.Int64("fsize", 0, "largest file the run may write, in bytes")
	gateway := fs.String("gateway", "", "the daemon's gateway socket")
	listen := fs.String("listen", "127.0.0.1:0", "where to offer the gateway")
	lifeline := fs.Int("lifeline", 0, "fd whose EOF means the run is over (the daemon ended it, or is gone)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "nanoclawd sandbox-init: no agent command after --; it is started by nanoclawd, not by people")
		return 2
	}
	if err := setLimits(*nproc, *fsize); err != nil {
		fmt.Fprintln(os.Stderr, "nanoclawd sandbox-init:", err)
		return 126
	}
	env := os.Environ()
	if *gateway != "" {
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintf(os.Stderr, "nanoclawd sandbox-init: offering the gateway on %s: %v\n", *listen, err)
			return 126
		}
		go bridge(ln, *gateway)
		url := "http://" + ln.Addr().String()
		env = setEnv(env, map[string]string{
			"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
			"ALL_PROXY": url, "NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1",
			"ANTHROPIC_BASE_URL": url,
		})
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = env
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "nanoclawd sandbox-init: starting %q inside the sandbox: %v (is it, and all it needs, inside agent.command's directory or the system runtime?)\n", argv[0], err)
		return 127
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	if *lifeline > 0 {
		// The daemon holds the other end and closes it to end the run (a
		// stop, a timeout), or is gone (a kill -9 too): the agent gets
		// SIGTERM and a grace to exit, then this process leaves, which on
		// Linux ends the sandbox and all in it.
		go func() {
			io.Copy(io.Discard, os.NewFile(uintptr(*lifeline), "lifeline"))
			fmt.Fprintln(os.Stderr, "nanoclawd sandbox-init: the run is over (the daemon ended it, or is gone); ending the agent")
			cmd.Process.Signal(syscall.SIGTERM)
			time.Sleep(endGrace)
			os.Exit(137)
		}()
	}
	return reap(cmd.Process.Pid)
}

// endGrace is how long the agent has to exit after SIGTERM once the run
// is over: within the daemon's own grace (runner.DefaultKillGrace, 5 s),
// so that the sandbox has ended, all of it, before the daemon's SIGKILL
// would reach only bubblewrap.
const endGrace = 4 * time.Second

// reap waits for the agent (pid) and returns its status as a shell
// would. Every other process whose parent leaves becomes this one's
// child, as the PID namespace's pid 1: each is reaped too, so none stays
// a zombie that counts against the run's process limit.
func reap(pid int) int {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			fmt.Fprintf(os.Stderr, "nanoclawd sandbox-init: waiting for the agent: %v\n", err)
			return 1
		case got != pid:
			continue
		case ws.Signaled():
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// bridge hands every connection on ln to the gateway socket.
func bridge(ln net.Listener, socket string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			g, err := net.Dial("unix", socket)
			if err != nil {
				return
			}
			defer g.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(g, c); g.(*net.UnixConn).CloseWrite(); done <- struct{}{} }()
			go func() { io.Copy(c, g); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func setEnv(env []string, set map[string]string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				name = kv[:i]
				break
			}
		}
		if _, ok := set[name]; !ok {
			out = append(out, kv)
		}
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

func setLimits(nproc int, fsize int64) error {
	if nproc > 0 {
		if err := setRlimit(rlimitNproc, uint64(nproc)); err != nil {
			return fmt.Errorf("limit processes to %d: %w", nproc, err)
		}
	}
	if fsize > 0 {
		if err := setRlimit(syscall.RLIMIT_FSIZE, uint64(fsize)); err != nil {
			return fmt.Errorf("limit file size to %d bytes: %w", fsize, err)
		}
		// A write past the limit fails with EFBIG instead of killing the writer.
		signal.Ignore(syscall.SIGXFSZ)
	}
	return nil
}

func setRlimit(which int, v uint64) error {
	return syscall.Setrlimit(which, &syscall.Rlimit{Cur: v, Max: v})
}
