package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/protocol"
	"github.com/nanoclawd/nanoclawd/internal/security"
)

// agentBin is the stand-in agent (internal/testkit/testagent), built once.
var agentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runner-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBin = filepath.Join(dir, "testagent")
	build := exec.Command("go", "build", "-tags", "sqlite_fts5", "-o", agentBin, "github.com/nanoclawd/nanoclawd/internal/testkit/testagent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the stand-in agent:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// recorder is a Handler that keeps everything and can react to results.
type recorder struct {
	mu         sync.Mutex
	pid        int
	results    []Result
	violations []security.Violation
	react      func(Result)
	onStart    func()
}

func (r *recorder) OnStart(pid int) {
	r.mu.Lock()
	r.pid = pid
	r.mu.Unlock()
	if r.onStart != nil {
		r.onStart()
	}
}
func (r *recorder) OnViolation(v security.Violation) {
	r.mu.Lock()
	r.violations = append(r.violations, v)
	r.mu.Unlock()
}
func (r *recorder) OnResult(res Result) {
	r.mu.Lock()
	r.results = append(r.results, res)
	r.mu.Unlock()
	if r.react != nil {
		r.react(res)
	}
}

// texts lists the results' texts, "<nil>" for a null result.
func (r *recorder) texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, res := range r.results {
		if res.Result == nil {
			out = append(out, "<nil>")
			continue
		}
		out = append(out, *res.Result)
	}
	return out
}

// newSpec runs the stand-in agent for group "fam" with text as its last message.
func newSpec(t *testing.T, text string) Spec {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "groups", "fam")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ipc := filepath.Join(root, "data", "ipc", "fam")
	return Spec{
		Command: []string{agentBin},
		Dir:     dir,
		Env: map[string]string{
			protocol.EnvGroupFolder: "fam",
			protocol.EnvIPCDir:      ipc,
		},
		Input: protocol.ContainerInput{
			Prompt:        prompt(text),
			GroupFolder:   "fam",
			ChatJID:       "local:fam",
			AssistantName: "Andy",
			SDKOptions:    json.RawMessage(`{"cwd":"x"}`),
		},
		IPCDir:  ipc,
		LogDir:  filepath.Join(dir, "logs"),
		Timeout: time.Minute, // a safety net; tests end long before
	}
}

func prompt(text string) string {
	return "<messages>\n<message sender=\"Tess\" time=\"2026-11-21T10:00:00Z\">@Andy " +
		html.EscapeString(text) + "</message>\n</messages>"
}

func run(t *testing.T, spec Spec, h *recorder) (Outcome, error) {
	t.Helper()
	return Run(context.Background(), spec, h)
}

func readLog(t *testing.T, out Outcome) string {
	t.Helper()
	b, err := os.ReadFile(out.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gone waits until pid no longer runs (a zombie left to an init that does not
// reap counts as gone: it cannot do anything any more).
func gone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			return
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] == "Z" {
				return
			}
		}
		time.Sleep(10 * time.Millisecond) // polling a pid is the only way to watch a stranger's process
	}
	t.Fatalf("process %d still runs", pid)
}

func forkedPID(t *testing.T, h *recorder) int {
	t.Helper()
	for _, s := range h.texts() {
		if p, ok := strings.CutPrefix(s, "forked "); ok {
			pid, err := strconv.Atoi(p)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
	}
	t.Fatalf("no grandchild reported in %q", h.texts())
	return 0
}

func TestRunEchoFrame(t *testing.T) {
	spec := newSpec(t, "echo hello & <bye>")
	h := &recorder{}
	out, err := run(t, spec, h)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.texts(); !slices.Equal(got, []string{"echo: hello & <bye>"}) {
		t.Fatalf("results %q", got)
	}
	if res := h.results[0]; res.Status != "success" || !strings.HasPrefix(res.NewSessionID, "sess-") {
		t.Fatalf("result %+v", res)
	}
	if out.Results != 1 || out.NewSessionID != h.results[0].NewSessionID || out.ExitCode != 0 || h.pid != out.PID || out.PID == 0 {
		t.Fatalf("outcome %+v, pid seen %d", out, h.pid)
	}
	log := readLog(t, out)
	if !strings.Contains(log, "runner: start") || !strings.Contains(log, "runner: exit") {
		t.Fatalf("log lacks start/exit lines:\n%s", log)
	}
	if filepath.Dir(out.LogFile) != spec.LogDir {
		t.Fatalf("log %s not in %s", out.LogFile, spec.LogDir)
	}

	// The session id given is the one the agent sees.
	spec.Input.Prompt = prompt("session")
	spec.Input.SessionID = "sess-42"
	h = &recorder{}
	if _, err := run(t, spec, h); err != nil {
		t.Fatal(err)
	}
	if got := h.texts(); !slices.Equal(got, []string{"session: sess-42"}) {
		t.Fatalf("results %q", got)
	}
}

func TestRunFramesAmongNoise(t *testing.T) {
	h := &recorder{}
	out, err := run(t, newSpec(t, "noise"), h)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.texts(); !slices.Equal(got, []string{"one", "<nil>", "two"}) {
		t.Fatalf("results %q, want one, <nil>, two", got)
	}
	log := readLog(t, out)
	for _, want := range []string{
		"stdout: starting up, not a frame",
		`stdout: "result":"never"}`,
		"frame dropped: invalid character",
		"stdout: trailing text without newline",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestRunViolationFrame(t *testing.T) {
	h := &recorder{}
	if _, err := run(t, newSpec(t, "violation network evil.example.com"), h); err != nil {
		t.Fatal(err)
	}
	if len(h.violations) != 1 {
		t.Fatalf("violations %+v", h.violations)
	}
	v := h.violations[0]
	if v.Group != "fam" || v.Kind != "network" || v.Tool != "Bash" || v.Target != "evil.example.com" ||
		v.Detail != "testagent" || v.Action != "reported" || v.Time.IsZero() {
		t.Fatalf("violation %+v", v)
	}
	if got := h.texts(); !slices.Equal(got, []string{"violation reported"}) {
		t.Fatalf("results %q", got)
	}
}

// Attack: a secret in the daemon's environment must not reach the agent
// unless named; only PATH, HOME and what the caller passes get through.
func TestRunEnvironmentFromScratch(t *testing.T) {
	t.Setenv("NANOCLAW_TEST_SECRET", "leaked")
	t.Setenv("ANTHROPIC_API_KEY", "daemon-key")
	spec := newSpec(t, "env")
	spec.Env["ANTHROPIC_API_KEY"] = "passed-key"
	h := &recorder{}
	if _, err := run(t, spec, h); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(h.texts()[0], "\n") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var names []string
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	want := []string{"ANTHROPIC_API_KEY", "HOME", "NANOCLAW_GROUP_FOLDER", "NANOCLAW_IPC_DIR", "PATH"}
	if !slices.Equal(names, want) {
		t.Fatalf("agent environment has %q, want exactly %q", names, want)
	}
	if env["ANTHROPIC_API_KEY"] != "passed-key" || env["PATH"] != os.Getenv("PATH") || env["HOME"] != os.Getenv("HOME") {
		t.Fatalf("values: %v", env)
	}

	// HOME may be replaced (a clean home for the agent).
	spec.Env["HOME"] = spec.Dir
	h = &recorder{}
	if _, err := run(t, spec, h); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.texts()[0], "HOME="+spec.Dir+"\n") {
		t.Fatalf("HOME not replaced: %s", h.texts()[0])
	}

	spec.Env["BAD=NAME"] = "x"
	if _, err := run(t, spec, &recorder{}); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("bad env name: %v", err)
	}
}

func TestRunStdinShape(t *testing.T) {
	keys := func(h *recorder) []string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(h.texts()[0]), &m); err != nil {
			t.Fatal(err)
		}
		var k []string
		for name := range m {
			k = append(k, name)
		}
		sort.Strings(k)
		return k
	}
	spec := newSpec(t, "stdin")
	h := &recorder{}
	if _, err := run(t, spec, h); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(h), []string{"assistantName", "chatJid", "groupFolder", "isMain", "prompt", "sdkOptions"}; !slices.Equal(got, want) {
		t.Fatalf("main-like input keys %q, want %q", got, want)
	}

	spec.Input.SessionID = "s1"
	spec.Input.IsScheduledTask = true
	spec.Input.Security = json.RawMessage(`{"sandbox":true}`)
	h = &recorder{}
	if _, err := run(t, spec, h); err != nil {
		t.Fatal(err)
	}
	if got, want := keys(h), []string{"assistantName", "chatJid", "groupFolder", "isMain", "isScheduledTask",
		"prompt", "sdkOptions", "security", "sessionId"}; !slices.Equal(got, want) {
		t.Fatalf("full input keys %q, want %q", got, want)
	}
	var in protocol.ContainerInput
	if err := json.Unmarshal([]byte(h.texts()[0]), &in); err != nil {
		t.Fatal(err)
	}
	if in.Prompt != spec.Input.Prompt || in.ChatJID != "local:fam" || string(in.SDKOptions) != `{"cwd":"x"}` ||
		string(in.Security) != `{"sandbox":true}` || in.SessionID != "s1" {
		t.Fatalf("round trip: %+v", in)
	}
}

// Attack: an agent that ignores SIGTERM and leaves a grandchild behind that
// ignores it too. The hard timeout must take both down.
func TestRunHardTimeoutKillsGroup(t *testing.T) {
	spec := newSpec(t, "fork hang")
	spec.Timeout = 300 * time.Millisecond
	spec.KillGrace = 200 * time.Millisecond
	h := &recorder{}
	out, err := run(t, spec, h)
	// The agent had answered ("forked …") before it hung: the timeout ends
	// it without failing the run.
	if err != nil || !out.TimedOut {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	gone(t, out.PID)
	gone(t, forkedPID(t, h))
	log := readLog(t, out)
	if !strings.Contains(log, "SIGTERM to process group") || !strings.Contains(log, "SIGKILL to process group") {
		t.Fatalf("log:\n%s", log)
	}
}

func TestRunCancelKillsGroup(t *testing.T) {
	spec := newSpec(t, "fork hang")
	spec.KillGrace = 200 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &recorder{react: func(Result) { cancel() }}
	out, err := Run(ctx, spec, h)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	gone(t, out.PID)
	gone(t, forkedPID(t, h))
}

// A confined agent is ended through its lifeline, not a signal: a
// sandbox's processes are not in the group a signal reaches (only
// bubblewrap is), and its first process ends them all when the lifeline
// closes. Here the agent ignores SIGTERM and leaves only when fd 3 reads
// EOF, long before the SIGKILL KillGrace would bring.
func TestRunCancelCutsTheLifeline(t *testing.T) {
	spec := newSpec(t, "")
	spec.Command = []string{"/bin/sh", "-c", `trap '' TERM; cat <&3; echo "lifeline closed" >&2`}
	spec.Lifeline = true
	spec.KillGrace = time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, err := Run(ctx, spec, &recorder{onStart: cancel})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	log := readLog(t, out)
	if !strings.Contains(log, "cancelled: closing the lifeline of process group") || !strings.Contains(log, "lifeline closed") ||
		strings.Contains(log, "SIGTERM") || strings.Contains(log, "SIGKILL") {
		t.Fatalf("log:\n%s", log)
	}
}

// An agent that exits normally but leaves a child holding its stdout: Run
// neither hangs on the open pipe nor leaves the child running.
func TestRunNoOrphanAfterCleanExit(t *testing.T) {
	h := &recorder{}
	out, err := run(t, newSpec(t, "fork"), h)
	if err != nil {
		t.Fatal(err)
	}
	gone(t, forkedPID(t, h))
	if out.ExitCode != 0 {
		t.Fatalf("outcome %+v", out)
	}
}

// Attack: an agent floods stdout and stderr with oversized lines and frames.
// The log stays under its cap, the real result still comes through.
func TestRunFloodIsCapped(t *testing.T) {
	spec := newSpec(t, "flood 8")
	spec.MaxLogBytes = 1 << 20
	h := &recorder{}
	out, err := run(t, spec, h)
	if err != nil {
		t.Fatal(err)
	}
	// The oversized frame is not dropped without a word: the chat is told.
	if got := h.texts(); len(got) != 2 || !strings.HasPrefix(got[0], "(The answer was longer than 1 MiB") || got[1] != "flooded" {
		t.Fatalf("results: %d, first bytes %.40q", len(got), got)
	}
	fi, err := os.Stat(out.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > spec.MaxLogBytes+logHeadroom {
		t.Fatalf("log is %d bytes, cap %d", fi.Size(), spec.MaxLogBytes)
	}
	log := readLog(t, out)
	for _, want := range []string{"frame dropped: payload longer than", "further agent output is dropped", "runner: exit"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
}

func TestReadLinesCutsLongLines(t *testing.T) {
	in := strings.Repeat("a", 300_000) + "\nshort\r\n" + strings.Repeat("b", 70_000)
	type line struct {
		n   int
		cut bool
	}
	var got []line
	readLines(strings.NewReader(in), 100_000, func(l []byte, cut bool) { got = append(got, line{len(l), cut}) })
	want := []line{{100_000, true}, {5, false}, {70_000, false}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestRunCrashCarriesStderrTail(t *testing.T) {
	out, err := run(t, newSpec(t, "crash"), &recorder{})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || out.ExitCode != 3 {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	if !strings.Contains(ee.StderrTail, "crashed on purpose") || !strings.Contains(err.Error(), "exited with status 3") {
		t.Fatalf("error %q", err)
	}
}

func TestRunBadSpecs(t *testing.T) {
	spec := newSpec(t, "echo x")
	spec.Command = []string{filepath.Join(t.TempDir(), "no-such-agent")}
	if _, err := run(t, spec, &recorder{}); err == nil || !strings.Contains(err.Error(), "agent.command") {
		t.Fatalf("missing command: %v", err)
	}
	spec = newSpec(t, "echo x")
	spec.Dir = filepath.Join(spec.Dir, "missing")
	if _, err := run(t, spec, &recorder{}); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("missing dir: %v", err)
	}
	spec = newSpec(t, "echo x")
	spec.Command = nil
	if _, err := run(t, spec, &recorder{}); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("no command: %v", err)
	}
}

// BenchmarkRunEcho measures one whole agent run (spawn → result → exit) of
// the stand-in agent: the runner's own overhead on top of a process start.
func BenchmarkRunEcho(b *testing.B) {
	root := b.TempDir()
	spec := Spec{
		Command: []string{agentBin}, Dir: root, IPCDir: filepath.Join(root, "ipc"), LogDir: filepath.Join(root, "logs"),
		Input: protocol.ContainerInput{Prompt: prompt("echo hi"), GroupFolder: "fam", SDKOptions: json.RawMessage(`{}`)},
	}
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		if _, err := Run(context.Background(), spec, &recorder{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e3 }
	b.ReportMetric(p(0.50), "p50-µs")
	b.ReportMetric(p(0.99), "p99-µs")
}

// A turn that never answers is ended by the hard timeout and fails.
func TestRunHardTimeoutWithoutAnswerFails(t *testing.T) {
	spec := newSpec(t, "hang")
	spec.Timeout = 300 * time.Millisecond
	spec.KillGrace = 200 * time.Millisecond
	out, err := run(t, spec, &recorder{})
	if !errors.Is(err, ErrTimeout) || !out.TimedOut || out.Results != 0 {
		t.Fatalf("err %v, outcome %+v", err, out)
	}
	gone(t, out.PID)
}

// A slow handler (each violation is a SQLite write in the daemon, slow
// under load) is still reading what the agent wrote when the agent has
// exited: everything in the pipe is read, the final answer included,
// however long that takes — only a pipe held open with nothing in it
// (an escaped descendant) is cut.
func TestRunReadsEverythingASlowHandlerHasNotYet(t *testing.T) {
	spec := newSpec(t, "violations 600")
	h := &slowRecorder{delay: 10 * time.Millisecond}
	out, err := Run(context.Background(), spec, h)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(h.violations); n != 601 {
		t.Errorf("%d violations handled, want 601\n%s", n, readLog(t, out))
	}
	if got := h.texts(); !slices.Equal(got, []string{"violations reported"}) {
		t.Errorf("results %q, want the final answer", got)
	}
}

type slowRecorder struct {
	recorder
	delay time.Duration
}

func (r *slowRecorder) OnViolation(v security.Violation) {
	time.Sleep(r.delay) // the time a busy database takes; not a synchronisation
	r.recorder.OnViolation(v)
}

// The run log is made while the agent starts. When it cannot be made (its
// place is a file here), the agent, already running, is stopped and the
// run fails with why: no agent runs without its log.
func TestRunWithoutItsLogStopsTheAgent(t *testing.T) {
	spec := newSpec(t, "hang")
	spec.Timeout = time.Hour // only the missing log may end it
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	spec.LogDir = filepath.Join(notDir, "logs")
	h := &recorder{}
	out, err := run(t, spec, h)
	if !errors.Is(err, syscall.ENOTDIR) || !strings.Contains(err.Error(), "run log") {
		t.Fatalf("err %v, want the run log's ENOTDIR", err)
	}
	if out.PID == 0 || h.pid != out.PID || out.LogFile != "" {
		t.Fatalf("outcome %+v, pid seen %d: want the started agent, no log", out, h.pid)
	}
	gone(t, out.PID)
}
