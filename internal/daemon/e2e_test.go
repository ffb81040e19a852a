package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The end-to-end tests run the real nanoclawd binary with the local channel
// and the stand-in agent (internal/testagent), and talk to it only through
// the contract's surfaces: the CLI, the socket API and files.

var (
	nanoclawd string
	testagent string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nanoclawd-e2e")
	if err != nil {
		panic(err)
	}
	nanoclawd = filepath.Join(dir, "nanoclawd")
	testagent = filepath.Join(dir, "testagent")
	for bin, pkg := range map[string]string{nanoclawd: "../../cmd/nanoclawd", testagent: "../testagent"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			panic(fmt.Sprintf("build %s: %v\n%s", pkg, err, out))
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// install is one nanoclawd installation in a temp dir.
type install struct {
	t      *testing.T
	dir    string
	config string
	socket string
	env    []string
	client *http.Client
	seen   int64 // the last seq waitNext returned
}

func newInstall(t *testing.T, agentConfig string) *install {
	return newInstallWith(t, agentConfig, `"whatsapp": {"enabled": false}`)
}

func newInstallWith(t *testing.T, agentConfig, whatsapp string) *install {
	t.Helper()
	dir := t.TempDir()
	// Unix socket paths are limited to ~108 bytes; t.TempDir() can be long.
	sockDir, err := os.MkdirTemp("", "nc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	in := &install{t: t, dir: dir, config: filepath.Join(dir, "nanoclaw.config.jsonc"), socket: filepath.Join(sockDir, "s")}
	if agentConfig == "" {
		agentConfig = `"command": [` + quote(testagent) + `], "timeout": "60s", "idleTimeout": "60s"`
	}
	cfg := fmt.Sprintf(`{
		"channels": {%s, "local": {"enabled": true, "socket": %s}},
		"agent": {%s},
		"alerts": {"cooldown": "0s"},
	}`, whatsapp, quote(in.socket), agentConfig)
	if err := os.WriteFile(in.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	in.env = append(os.Environ(), "NANOCLAWD_RETRY_BASE=200ms")
	in.client = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", in.socket)
		},
	}}
	return in
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func (in *install) cli(args ...string) string {
	in.t.Helper()
	cmd := exec.Command(nanoclawd, append(args, "--config", in.config)...)
	cmd.Env = in.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		in.t.Fatalf("nanoclawd %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (in *install) addGroup(jid, folder string, extra ...string) {
	in.cli(append([]string{"groups", "add", "--jid", jid, "--name", folder, "--folder", folder}, extra...)...)
}

type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
}

// syncBuffer is the daemon's output, written by exec and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the daemon and waits until its socket answers.
func (in *install) start() *proc {
	in.t.Helper()
	cmd := exec.Command(nanoclawd, "run", "--config", in.config)
	cmd.Env = in.env
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cmd.Stdout = stderr
	if err := cmd.Start(); err != nil {
		in.t.Fatal(err)
	}
	p := &proc{cmd: cmd, stderr: stderr, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	in.t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if in.t.Failed() {
			in.t.Logf("daemon output:\n%s", stderr.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := in.client.Get("http://local/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		select {
		case <-p.done:
			in.t.Fatalf("daemon exited: %s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			in.t.Fatalf("daemon did not answer on %s: %s", in.socket, stderr.String())
		}
	}
}

func (p *proc) kill9(t *testing.T) {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (in *install) post(chat, sender, text string) string {
	in.t.Helper()
	body, _ := json.Marshal(map[string]string{"chatJid": chat, "sender": sender + "@local", "senderName": sender, "text": text})
	resp, err := in.client.Post("http://local/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusAccepted || out.ID == "" {
		in.t.Fatalf("POST /messages: %d", resp.StatusCode)
	}
	return out.ID
}

type sent struct {
	Seq     int64  `json:"seq"`
	ChatJID string `json:"chatJid"`
	Text    string `json:"text"`
	Time    string `json:"time"`
}

func (in *install) sentAfter(after int64, wait time.Duration) []sent {
	in.t.Helper()
	resp, err := in.client.Get(fmt.Sprintf("http://local/sent?after=%d&wait=%g", after, wait.Seconds()))
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct{ Messages []sent }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		in.t.Fatal(err)
	}
	return page.Messages
}

// waitFor collects sent messages until one in chat satisfies ok, and
// returns everything sent so far.
func (in *install) waitFor(chat string, ok func(string) bool) []sent {
	in.t.Helper()
	return in.waitAfter(0, chat, ok)
}

// waitNext is waitFor for the first match after the last one waitNext
// returned, and returns that match.
func (in *install) waitNext(chat string, ok func(string) bool) sent {
	in.t.Helper()
	all := in.waitAfter(in.seen, chat, ok)
	m := all[len(all)-1]
	in.seen = m.Seq
	return m
}

func (in *install) waitAfter(after int64, chat string, ok func(string) bool) []sent {
	in.t.Helper()
	var all []sent
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range in.sentAfter(after, 5*time.Second) {
			all = append(all, m)
			after = m.Seq
			if m.ChatJID == chat && ok(m.Text) {
				return all
			}
		}
	}
	in.t.Fatalf("no message in %s satisfied the check; sent: %+v", chat, all)
	return nil
}

func inChat(all []sent, chat string) []string {
	var out []string
	for _, m := range all {
		if m.ChatJID == chat {
			out = append(out, m.Text)
		}
	}
	return out
}

func equals(want string) func(string) bool { return func(s string) bool { return s == want } }

func TestReplyArrives(t *testing.T) {
	in := newInstall(t, "")
	in.addGroup("local:main", "main", "--main")
	in.start()
	in.post("local:main", "Owner", "echo hello")
	all := in.waitFor("local:main", equals("echo: hello"))
	if _, err := time.Parse(time.RFC3339Nano, all[len(all)-1].Time); err != nil || !strings.Contains(all[len(all)-1].Time, ".") {
		t.Errorf("time %q is not RFC 3339 with fractions", all[len(all)-1].Time)
	}
}

func TestTriggerContextAndEscaping(t *testing.T) {
	in := newInstall(t, "")
	in.addGroup("local:main", "main", "--main")
	in.addGroup("local:family", "family")
	in.start()
	in.post("local:family", "Alice", `dinner at <8> & "bring" wine?`)
	in.post("local:family", "Bob", "@andy prompt")
	all := in.waitFor("local:family", func(s string) bool { return strings.HasPrefix(s, "<messages>") })
	prompt := inChat(all, "local:family")[0]
	for _, want := range []string{
		`<message sender="Alice" time="`,
		`dinner at &lt;8&gt; &amp; &quot;bring&quot; wine?</message>`,
		`<message sender="Bob" time="`, `">@andy prompt</message>`,
	} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Index(prompt, "Alice") > strings.Index(prompt, "Bob") {
		t.Error("context not oldest first")
	}
	// The next trigger brings only what came after the answer.
	in.post("local:family", "Carol", "@Andy prompt")
	all = in.waitFor("local:family", func(s string) bool { return strings.Contains(s, "Carol") })
	last := inChat(all, "local:family")
	if p := last[len(last)-1]; strings.Contains(p, "Alice") || strings.Contains(p, "Bob") {
		t.Errorf("answered messages repeated:\n%s", p)
	}
	// "@Andyx" is not the trigger; nothing answers it.
	in.post("local:family", "Dan", "@Andyx echo nope")
	in.post("local:family", "Dan", "@Andy echo yes")
	all = in.waitFor("local:family", equals("echo: yes"))
	for _, s := range inChat(all, "local:family") {
		if s == "echo: nope" {
			t.Error("a non-trigger started the agent")
		}
	}
}

func TestSessionRoundTrip(t *testing.T) {
	in := newInstall(t, "")
	in.addGroup("local:main", "main", "--main")
	in.start()
	in.post("local:main", "Owner", "session")
	in.waitFor("local:main", equals("session: none"))
	in.post("local:main", "Owner", "echo first")
	in.waitFor("local:main", equals("echo: first"))
	in.post("local:main", "Owner", "session")
	all := in.waitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "session: sess-") })
	_ = all
}

func TestMaxConcurrent(t *testing.T) {
	counts := t.TempDir()
	wrapper := filepath.Join(t.TempDir(), "agent.sh")
	// Each run marks itself running, records how many are, then hands over
	// to the stand-in agent (stdin passes through).
	os.WriteFile(wrapper, []byte(`#!/bin/sh
touch "$NC_COUNT_DIR/run.$$"
ls "$NC_COUNT_DIR" | grep -c '^run\.' >> "$NC_COUNT_DIR/counts"
`+testagent+`
rc=$?
rm -f "$NC_COUNT_DIR/run.$$"
exit $rc
`), 0o755)
	in := newInstall(t, `"command": [`+quote(wrapper)+`], "maxConcurrent": 2, "env": ["NC_COUNT_DIR"]`)
	in.env = append(in.env, "NC_COUNT_DIR="+counts)
	in.addGroup("local:main", "main", "--main")
	for i := 1; i <= 4; i++ {
		in.addGroup(fmt.Sprintf("local:g%d", i), fmt.Sprintf("g%d", i), "--no-trigger")
	}
	in.start()
	for i := 1; i <= 4; i++ {
		in.post(fmt.Sprintf("local:g%d", i), "U", "sleep 1.5")
	}
	done := map[string]bool{}
	var after int64
	deadline := time.Now().Add(60 * time.Second)
	for len(done) < 4 && time.Now().Before(deadline) {
		for _, m := range in.sentAfter(after, 5*time.Second) {
			after = m.Seq
			if m.Text == "slept 1.5" {
				done[m.ChatJID] = true
			}
		}
	}
	if len(done) != 4 {
		t.Fatalf("answered: %v", done)
	}
	data, _ := os.ReadFile(filepath.Join(counts, "counts"))
	peak := 0
	for _, f := range strings.Fields(string(data)) {
		var n int
		fmt.Sscan(f, &n)
		peak = max(peak, n)
	}
	if peak > 2 {
		t.Errorf("%d agents ran at once with maxConcurrent 2 (%q)", peak, data)
	}
	if peak < 2 {
		t.Errorf("never ran 2 agents at once (%q)", data)
	}
}

func TestHungAgentKilledAndGroupRecovers(t *testing.T) {
	in := newInstall(t, `"command": [`+quote(testagent)+`], "timeout": "1s"`)
	in.addGroup("local:main", "main", "--main")
	in.start()
	in.post("local:main", "Owner", "hang")
	// Wait for the first attempt to be under way, then ask for something
	// else: the retry carries both messages and answers the last.
	waitFile(t, filepath.Join(in.dir, "groups", "main", "logs"), "")
	in.post("local:main", "Owner", "echo recovered")
	in.waitFor("local:main", equals("echo: recovered"))
	if n := countProcs(testagent); n != 0 {
		t.Errorf("%d stand-in agents still running", n)
	}
}

func TestCrashingAgentRetriedThenReported(t *testing.T) {
	in := newInstall(t, "")
	in.addGroup("local:main", "main", "--main")
	in.start()
	in.post("local:main", "Owner", "crash")
	all := in.waitFor("local:main", func(s string) bool { return strings.Contains(s, "could not answer") })
	msg := inChat(all, "local:main")
	if len(msg) != 1 || !strings.Contains(msg[0], "status 3") {
		t.Errorf("report: %q", msg)
	}
	logs, _ := filepath.Glob(filepath.Join(in.dir, "groups", "main", "logs", "*.log"))
	if len(logs) != 6 {
		t.Errorf("%d runs, want 1 + 5 retries", len(logs))
	}
	// The group works again afterwards, and the crash is not replayed.
	in.post("local:main", "Owner", "echo fine")
	in.waitFor("local:main", equals("echo: fine"))
}

func TestKill9MidRunAnsweredOnce(t *testing.T) {
	in := newInstall(t, "")
	in.addGroup("local:main", "main", "--main")
	p := in.start()
	in.post("local:main", "Owner", "sleep 2")
	waitFile(t, filepath.Join(in.dir, "groups", "main", "logs"), "")
	p.kill9(t)
	in.start()
	in.waitFor("local:main", equals("slept 2"))
	if n := countProcs(testagent); n != 0 {
		t.Errorf("%d agent processes survived the kill -9 and the restart", n)
	}
	// Anything doubled would have been sent right behind it.
	in.post("local:main", "Owner", "echo after")
	all := in.waitFor("local:main", equals("echo: after"))
	count := 0
	for _, s := range inChat(all, "local:main") {
		if s == "slept 2" {
			count++
		}
	}
	if count != 1 {
		t.Errorf("answered %d times: %q", count, inChat(all, "local:main"))
	}
}

// waitFile waits until dir holds a file whose name contains sub.
func waitFile(t *testing.T, dir, sub string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.Contains(e.Name(), sub) && !e.IsDir() {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no file in %s", dir)
}

// countProcs counts running processes whose executable is path.
func countProcs(path string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err == nil && exe == path {
			n++
		}
	}
	return n
}

// WhatsApp enabled but never paired: the daemon says so and keeps serving
// the local channel.
func TestUnpairedWhatsAppKeepsLocalChannel(t *testing.T) {
	in := newInstallWith(t, "", `"whatsapp": {"enabled": true}`)
	in.addGroup("local:main", "main", "--main")
	p := in.start()
	in.post("local:main", "Owner", "echo still here")
	in.waitFor("local:main", equals("echo: still here"))
	if !strings.Contains(p.stderr.String(), "whatsapp login") {
		t.Errorf("no hint to pair: %s", p.stderr.String())
	}
}

func TestConfigReload(t *testing.T) {
	in := newInstall(t, "")
	in.addGroup("local:main", "main", "--main")
	in.start()
	src, _ := os.ReadFile(in.config)
	// A valid edit applies to the next run.
	edited := strings.Replace(string(src), "{", `{"assistantName": "Bob",`, 1)
	os.WriteFile(in.config, []byte(edited), 0o600)
	deadline := time.Now().Add(30 * time.Second)
	isStdin := func(s string) bool { return strings.Contains(s, `"assistantName"`) }
	for {
		in.post("local:main", "Owner", "stdin")
		if strings.Contains(in.waitNext("local:main", isStdin).Text, `"assistantName":"Bob"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("valid edit never applied")
		}
	}
	// An invalid edit keeps the last good config and tells the main group
	// where the problem is.
	os.WriteFile(in.config, []byte(strings.Replace(edited, `"alerts"`, `"alertz"`, 1)), 0o600)
	msg := in.waitNext("local:main", func(s string) bool { return strings.Contains(s, "is invalid") }).Text
	if !strings.Contains(msg, in.config+":4:3: unknown key \"alertz\"") {
		t.Errorf("invalid-edit notice: %q", msg)
	}
	in.post("local:main", "Owner", "stdin")
	if !strings.Contains(in.waitNext("local:main", isStdin).Text, `"assistantName":"Bob"`) {
		t.Error("the last good config was not kept")
	}
}

func TestSingleInstance(t *testing.T) {
	in := newInstall(t, "")
	p := in.start()
	cmd := exec.Command(nanoclawd, "run", "--config", in.config)
	cmd.Env = in.env
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("a second daemon started on the same dataDir")
	}
	if want := fmt.Sprintf("PID %d holds", p.cmd.Process.Pid); !strings.Contains(string(out), want) {
		t.Errorf("second instance said %q, want it to name %q", out, want)
	}
}

func TestSIGTERMLetsTheAgentFinish(t *testing.T) {
	in := newInstall(t, "")
	in.addGroup("local:main", "main", "--main")
	p := in.start()
	in.post("local:main", "Owner", "sleep 1.5")
	waitFile(t, filepath.Join(in.dir, "groups", "main", "logs"), "")
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not stop after SIGTERM")
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM", code)
	}
	if n := countProcs(testagent); n != 0 {
		t.Errorf("%d agents outlived the daemon", n)
	}
	// The answer went out before the daemon stopped.
	in.start()
	var found bool
	for _, m := range in.sentAfter(0, 0) {
		found = found || m.Text == "slept 1.5"
	}
	if !found {
		t.Error("the running agent's answer was lost on shutdown")
	}
}

// A kill -9 of the daemon takes the agent with it; what the agent started
// is ended by the next start.
func TestKill9LeavesNoOrphans(t *testing.T) {
	in := newInstall(t, "")
	in.addGroup("local:main", "main", "--main")
	p := in.start()
	in.post("local:main", "Owner", "fork sleep 30")
	in.waitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "forked ") })
	p.kill9(t)
	in.start()
	deadline := time.Now().Add(10 * time.Second)
	for countProcs(testagent) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d agent processes outlived the crashed daemon and its restart", countProcs(testagent))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A message for a group whose agent is running reaches that agent as an
// input/ file; silence then makes the daemon ask the agent to finish.
func TestFollowUpReachesRunningAgent(t *testing.T) {
	in := newInstall(t, `"command": [`+quote(testagent)+`], "idleTimeout": "1s"`)
	in.addGroup("local:main", "main", "--main")
	in.addGroup("local:family", "family")
	in.start()
	in.post("local:family", "Alice", "@Andy followup")
	in.waitNext("local:family", equals("ready"))
	// No trigger needed: the agent is already there.
	in.post("local:family", "Bob", "and <also> this")
	m := in.waitNext("local:family", func(s string) bool { return strings.HasPrefix(s, "followup: ") })
	if !strings.Contains(m.Text, `sender="Bob"`) || !strings.Contains(m.Text, "and &lt;also&gt; this") || strings.Contains(m.Text, "Alice") {
		t.Errorf("follow-up: %q", m.Text)
	}
	in.waitNext("local:family", equals("closed"))
	// Everything was answered: a new trigger brings only itself.
	in.post("local:family", "Carol", "@Andy prompt")
	if p := in.waitNext("local:family", func(s string) bool { return strings.HasPrefix(s, "<messages>") }).Text; strings.Contains(p, "Bob") {
		t.Errorf("a follow-up answered in the last run was sent again:\n%s", p)
	}
}

// Secrets a service manager does not pass come from nanoclawd.env beside
// the config; a file others can read is refused.
func TestEnvFile(t *testing.T) {
	in := newInstall(t, `"command": [`+quote(testagent)+`], "env": ["NC_TEST_SECRET"]`)
	in.addGroup("local:main", "main", "--main")
	envFile := filepath.Join(in.dir, "nanoclawd.env")
	os.WriteFile(envFile, []byte("# for the service\nNC_TEST_SECRET=\"s3cret value\"\n"), 0o644)
	cmd := exec.Command(nanoclawd, "run", "--config", in.config)
	cmd.Env = in.env
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "chmod 600 "+envFile) {
		t.Fatalf("a world-readable env file was accepted: %v %s", err, out)
	}
	os.Chmod(envFile, 0o600)
	in.start()
	in.post("local:main", "Owner", "env")
	in.waitFor("local:main", func(s string) bool { return strings.Contains(s, "NC_TEST_SECRET=s3cret value") })
}

// Groups added and removed with the CLI take effect in the running daemon:
// the new group is answered and its IPC directory watched at once.
func TestGroupChangesReachRunningDaemon(t *testing.T) {
	in := newInstall(t, "")
	in.addGroup("local:main", "main", "--main")
	in.start()
	in.addGroup("local:late", "late")
	in.post("local:late", "Ann", "@Andy echo hello late")
	in.waitNext("local:late", equals("echo: hello late"))

	bad := filepath.Join(in.dir, "data", "ipc", "late", "messages", "x.json")
	os.MkdirAll(filepath.Dir(bad), 0o700)
	os.WriteFile(bad+".tmp", []byte("{not json"), 0o600)
	os.Rename(bad+".tmp", bad)
	waitFile(t, filepath.Join(in.dir, "data", "ipc", "errors"), "x.json")

	in.cli("groups", "remove", "late")
	in.post("local:late", "Ann", "@Andy echo gone")
	in.post("local:main", "Owner", "echo marker")
	all := in.waitFor("local:main", equals("echo: marker"))
	for _, s := range inChat(all, "local:late") {
		if s == "echo: gone" {
			t.Error("a removed group was answered")
		}
	}
}
