// Package e2e is the one harness for tests that run the real nanoclawd
// binary: it builds the binaries a test binary needs (once, into a temp
// dir), installs nanoclawd in a temp dir with the local channel, runs CLI
// commands, starts the daemon and talks to it only through the contract's
// surfaces: the CLI, the local channel's socket API and files. It is
// imported only by tests and benchmarks, so it takes testing.TB everywhere.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/layout"
)

var (
	mu      sync.Mutex
	running bool   // Main is running the tests
	binDir  string // where Bin builds, removed by Main
	built   = map[string]build{}
)

type build struct {
	path string
	err  error
}

// Main runs the tests of a package that uses Bin (directly or through New
// and Run) and then removes the binaries it built. Call it from TestMain.
func Main(m *testing.M) {
	mu.Lock()
	running = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	mu.Unlock()
	os.Exit(code)
}

// Bin builds the command pkg (a directory below the module root, such as
// "internal/testkit/bench/benchagent") the first time it is asked for and returns
// the binary's path. Building on demand means a test binary whose tests
// all skip, or a benchmark package run without -bench, builds nothing.
func Bin(tb testing.TB, pkg string) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts a built nanoclawd or agent: not under -short (make test runs it)")
	}
	mu.Lock()
	defer mu.Unlock()
	if !running {
		tb.Fatal("e2e.Bin: call e2e.Main(m) from TestMain, so the built binaries are removed afterwards")
	}
	b, ok := built[pkg]
	if !ok {
		b.path, b.err = buildPkg(pkg)
		built[pkg] = b
	}
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// RaceEnv, when set, builds the binaries with the race detector, so the
// end-to-end tests also look for data races inside the daemon:
// NANOCLAWD_E2E_RACE=1 go test ./e2e/
const RaceEnv = "NANOCLAWD_E2E_RACE"

func buildPkg(pkg string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	if binDir == "" {
		if binDir, err = os.MkdirTemp("", "nanoclawd-e2e"); err != nil {
			return "", err
		}
		// A root daemon starts confined runs as another user, who runs
		// these binaries.
		if err := os.Chmod(binDir, 0o755); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(binDir, filepath.Base(pkg))
	// The daemon's SQLite needs FTS5 (the search index); without the tag
	// its database refuses to open.
	args := []string{"build", "-tags", "sqlite_fts5", "-o", binDir + "/"}
	if os.Getenv(RaceEnv) != "" {
		args = append(args, "-race")
	}
	pkgs := []string{"./" + pkg}
	if pkg == "cmd/nanoclawd" {
		pkgs = append(pkgs, "./cmd/nanoclawd-init") // the sandbox's first process, beside it as make builds it
	}
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./%s: %w\n%s", pkg, err, out)
	}
	if pkg == "cmd/nanoclawd" {
		if err := linkNode(binDir); err != nil {
			return "", fmt.Errorf("link bin/node beside the built nanoclawd: %w", err)
		}
	}
	return bin, nil
}

// moduleRoot is the nearest directory holding go.mod, from the test's
// working directory (its package directory) upward.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("e2e: no go.mod above the test's directory")
		}
		dir = parent
	}
}

// Shared makes dir writable by anyone and returns it: an allowWrite
// directory a root daemon's confined runs (another user) write to.
func Shared(tb testing.TB, dir string) string {
	tb.Helper()
	if err := os.Chmod(dir, 0o777); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// Nanoclawd is the built cmd/nanoclawd.
func Nanoclawd(tb testing.TB) string { tb.Helper(); return Bin(tb, "cmd/nanoclawd") }

// Testagent is the built stand-in agent, internal/testkit/testagent.
func Testagent(tb testing.TB) string { tb.Helper(); return Bin(tb, "internal/testkit/testagent") }

// Run runs nanoclawd with args in dir (the test's directory if "") with
// the environment env (this process's if nil) and returns its stdout,
// stderr and exit code. Only a binary that cannot be started fails tb.
func Run(tb testing.TB, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	tb.Helper()
	cmd := exec.Command(Nanoclawd(tb), args...)
	cmd.Dir = dir
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		tb.Fatalf("nanoclawd %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// Options shape an Install. The zero value is the local channel, the
// stand-in agent, no alert cooldown and this process's environment.
type Options struct {
	// Agent is the members of the config's "agent" object. Default: the
	// stand-in agent with 60 s timeouts.
	Agent string
	// Channels is the members of "channels" besides "local". Default:
	// WhatsApp disabled.
	Channels string
	// Alerts is the members of "alerts". Default: no cooldown.
	Alerts string
	// Security is the members of "hostSecurity" (e.g. an allowWrite for a
	// scratch dir a wrapper script writes). Default: none.
	Security string
	// Media is the members of "media" (maxBytes, transcribe). Default: none.
	Media string
	// Top is more members of the config's top-level object (e.g. a
	// "usage" block). Default: none.
	Top string
	// Env is added to the environment of the CLI and the daemon.
	Env []string
	// Home, when set, builds that environment from nothing: PATH,
	// HOME=Home and Env, so nothing of the machine's own (a real API key,
	// a real ~/.claude) takes part.
	Home string
	// Dir is where the config goes, with data/ and groups/ beside it.
	// Default: a new temp dir.
	Dir string
	// StopSignal is how Proc.Stop and the end of the test stop the daemon
	// (SIGKILL after 20 s if it is still there). Default: SIGKILL at once.
	StopSignal os.Signal
	// Wait bounds each WaitFor and WaitNext. Default: 60 s.
	Wait time.Duration
	// Deadline, when set, bounds Start and every wait instead: the whole
	// test, so a hang fails instead of stalling CI.
	Deadline time.Time
}

// Install is one nanoclawd installation: a config whose local channel
// listens on Socket, and the daemon started from it.
type Install struct {
	// TB is where failures go; a test may point it at a subtest while the
	// subtest runs.
	TB     testing.TB
	Dir    string
	Config string
	Socket string
	// Env is the CLI's and the daemon's environment; add to it before
	// Start.
	Env []string
	// Local is a client of the local channel on Socket.
	Local *local.Client

	stop     os.Signal
	wait     time.Duration
	deadline time.Time
	pending  []Sent // fetched from /sent, not yet passed by WaitNext
	fetched  int64  // the last seq WaitNext fetched
}

// New writes the config of a new installation.
func New(tb testing.TB, o Options) *Install {
	tb.Helper()
	if o.Dir == "" {
		o.Dir = tb.TempDir()
		tb.Cleanup(func() { removePatiently(o.Dir) }) // before t.TempDir's own removal
	}
	// A root daemon starts bubblewrap as the runs' user, which must pass
	// through the test's private temp dir to the install.
	if err := os.Chmod(filepath.Dir(o.Dir), 0o711); err != nil {
		tb.Fatal(err)
	}
	if o.Agent == "" {
		o.Agent = `"command": [` + Quote(Testagent(tb)) + `], "timeout": "60s", "idleTimeout": "60s"`
	}
	if !strings.Contains(o.Agent, `"warm"`) {
		// Agents started ahead would outlive each run; tests of them ask for them.
		o.Agent += `, "warm": 0`
	}
	if o.Channels == "" {
		o.Channels = `"whatsapp": {"enabled": false}`
	}
	if o.Alerts == "" {
		o.Alerts = `"cooldown": "0s"`
	}
	// Unix socket paths are limited to ~108 bytes; tb.TempDir() can be long.
	sockDir, err := os.MkdirTemp("", "nc")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "s")
	in := &Install{TB: tb, Dir: o.Dir, Config: filepath.Join(o.Dir, "nanoclaw.config.jsonc"), Socket: sock,
		Local: local.NewClient(sock), stop: o.StopSignal, wait: o.Wait, deadline: o.Deadline}
	security := ""
	if o.Security != "" {
		security = `"hostSecurity": {` + o.Security + `},`
	}
	if o.Media != "" {
		security += `"media": {` + o.Media + `},`
	}
	if o.Top != "" {
		security += o.Top + ","
	}
	if !strings.Contains(o.Top, `"console"`) {
		// Tests run side by side: each console takes a free port, which
		// status and 'nanoclawd console --url' name.
		security += `"console": {"listen": "127.0.0.1:0"},`
	}
	cfg := fmt.Sprintf(`{
		"channels": {%s, "local": {"enabled": true, "socket": %s}},
		"agent": {%s},
		"alerts": {%s},
		%s
	}`, o.Channels, Quote(in.Socket), o.Agent, o.Alerts, security)
	if err := os.WriteFile(in.Config, []byte(cfg), 0o600); err != nil {
		tb.Fatal(err)
	}
	// Agent runs that fail are retried after 200 ms, not the default
	// seconds, so retry tests stay fast.
	base := os.Environ()
	if o.Home != "" {
		base = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + o.Home}
	}
	in.Env = slices.Concat(base, []string{"NANOCLAWD_RETRY_BASE=200ms"}, o.Env)
	return in
}

// Layout names the install's files (its config keeps the default dataDir
// and groupsDir).
func (in *Install) Layout() layout.Layout {
	return layout.New(filepath.Join(in.Dir, layout.DefaultDataDir), filepath.Join(in.Dir, layout.DefaultGroupsDir))
}

// CLI runs a nanoclawd command against this installation and returns its
// stdout; a non-zero exit fails the test.
func (in *Install) CLI(args ...string) string {
	in.TB.Helper()
	out, errs, code := Run(in.TB, "", in.Env, slices.Concat(args, []string{"--config", in.Config})...)
	if code != 0 {
		in.TB.Fatalf("nanoclawd %v: exit %d\n%s%s", args, code, out, errs)
	}
	return out
}

// AddGroup registers the group folder (named folder too) for jid.
func (in *Install) AddGroup(jid, folder string, extra ...string) {
	in.TB.Helper()
	in.CLI(slices.Concat([]string{"groups", "add", "--jid", jid, "--name", folder, "--folder", folder}, extra)...)
}

// Proc is a running daemon.
type Proc struct {
	Cmd  *exec.Cmd
	Out  *Buffer       // its stdout and stderr
	Done chan struct{} // closed when it has exited
	// Ready is how long it took from exec until it was ready.
	Ready time.Duration
	stop  os.Signal
}

// Kill9 kills the daemon with SIGKILL and waits until it is gone.
func (p *Proc) Kill9() {
	p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.Done
}

// Stop stops the daemon as Options.StopSignal says and waits until it is
// gone. Stopping a stopped daemon does nothing.
func (p *Proc) Stop() {
	if p.stop == nil {
		p.Kill9()
		return
	}
	p.Cmd.Process.Signal(p.stop)
	select {
	case <-p.Done:
	case <-time.After(20 * time.Second):
		p.Kill9()
	}
}

// Start runs the daemon until the test ends and waits until it is ready:
// it has logged "nanoclawd running" (groups loaded, IPC directories
// watched), by which time its local channel must answer. If the test failed, the daemon's output
// is logged when it ends.
func (in *Install) Start() *Proc {
	tb := in.TB
	tb.Helper()
	// Only warnings reach stderr off a terminal; "running" is in the log
	// file, after what earlier starts wrote there.
	logFile := in.Layout().DaemonLog()
	var logged int64
	if fi, err := os.Stat(logFile); err == nil {
		logged = fi.Size()
	}
	cmd := exec.Command(Nanoclawd(tb), "run", "--config", in.Config)
	cmd.Env = in.Env
	p := &Proc{Cmd: cmd, Out: &Buffer{}, Done: make(chan struct{}), stop: in.stop}
	cmd.Stdout, cmd.Stderr = p.Out, p.Out
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.Done) }()
	tb.Cleanup(func() {
		p.Stop()
		// A sandbox the daemon was building when it was killed dies a
		// moment after it (die-with-parent) and may still make its mount
		// points in the install's folders meanwhile: it goes first, so
		// the test's temp dir can be removed.
		reapIn(in.Dir)
		if strings.Contains(p.Out.String(), "WARNING: DATA RACE") {
			tb.Errorf("the race detector found a data race in the daemon (built with %s)", RaceEnv)
		}
		if tb.Failed() {
			tb.Logf("daemon output:\n%s", p.Out.String())
		}
	})
	deadline := in.until(30 * time.Second)
	for {
		b, _ := os.ReadFile(logFile)
		if int64(len(b)) < logged {
			logged = 0 // rotated since
		}
		if bytes.Contains(b[logged:], []byte(`"nanoclawd running"`)) {
			// Running means ready: a client started now must find the
			// local channel's socket (the first-run guide says so).
			if err := in.Local.Health(context.Background()); err != nil {
				tb.Fatalf("the daemon logged \"nanoclawd running\" before its local channel answered: %v", err)
			}
			p.Ready = time.Since(t0)
			return p
		}
		select {
		case <-p.Done:
			tb.Fatalf("daemon exited: %s", p.Out.String())
		case <-time.After(time.Millisecond): // fine-grained: benchmarks measure Ready
		}
		if time.Now().After(deadline) {
			tb.Fatalf("daemon not ready on %s by %v: %s", in.Socket, deadline.Format(time.TimeOnly), p.Out.String())
		}
	}
}

// until is the deadline of a wait that lasts d unless Options.Deadline
// says otherwise.
func (in *Install) until(d time.Duration) time.Time {
	if !in.deadline.IsZero() {
		return in.deadline
	}
	return time.Now().Add(d)
}

// Post sends a message into chat through the local channel, as if sender
// typed it, and returns its id.
func (in *Install) Post(chat, sender, text string) string {
	in.TB.Helper()
	return in.PostReply(chat, sender, text, "", "")
}

// PostReply is Post for a message that replies to quotedText by quotedSender.
func (in *Install) PostReply(chat, sender, text, quotedSender, quotedText string) string {
	in.TB.Helper()
	id, err := in.Local.Post(context.Background(), local.Message{ChatJID: chat, Sender: sender + "@local", SenderName: sender, Text: text,
		QuotedSender: quotedSender, QuotedText: quotedText})
	if err != nil {
		in.TB.Fatal(err)
	}
	return id
}

// Quote is s as a JSON string, for config fragments.
func Quote(s string) string { b, _ := json.Marshal(s); return string(b) }
