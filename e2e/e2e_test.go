package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// The end-to-end tests run the real nanoclawd binary with the local channel
// and the stand-in agent (internal/testkit/testagent), and talk to it only through
// the contract's surfaces: the CLI, the socket API and files (internal/testkit/e2e).

func TestMain(m *testing.M) { e2e.Main(m) }

func TestReplyArrives(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "echo hello")
	all := in.WaitFor("local:main", e2e.Equals("echo: hello"))
	if _, err := time.Parse(time.RFC3339Nano, all[len(all)-1].Time); err != nil || !strings.Contains(all[len(all)-1].Time, ".") {
		t.Errorf("time %q is not RFC 3339 with fractions", all[len(all)-1].Time)
	}
}

func TestTriggerContextAndEscaping(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family")
	in.Start()
	alice := in.Post("local:family", "Alice", `dinner at <8> & "bring" wine?`)
	bob := in.Post("local:family", "Bob", "@andy prompt")
	all := in.WaitFor("local:family", func(s string) bool { return strings.HasPrefix(s, "<messages>") })
	prompt := e2e.InChat(all, "local:family")[0]
	for _, want := range []string{
		`<message id="` + alice + `" sender="Alice" time="`,
		`dinner at &lt;8&gt; &amp; &quot;bring&quot; wine?</message>`,
		`<message id="` + bob + `" sender="Bob" time="`, `">@andy prompt</message>`,
	} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Index(prompt, "Alice") > strings.Index(prompt, "Bob") {
		t.Error("context not oldest first")
	}
	// The next trigger brings only what came after the answer.
	in.Post("local:family", "Carol", "@Andy prompt")
	all = in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "Carol") })
	last := e2e.InChat(all, "local:family")
	if p := last[len(last)-1]; strings.Contains(p, "Alice") || strings.Contains(p, "Bob") {
		t.Errorf("answered messages repeated:\n%s", p)
	}
	// "@Andyx" is not the trigger; nothing answers it.
	in.Post("local:family", "Dan", "@Andyx echo nope")
	in.Post("local:family", "Dan", "@Andy echo yes")
	all = in.WaitFor("local:family", e2e.Equals("echo: yes"))
	for _, s := range e2e.InChat(all, "local:family") {
		if s == "echo: nope" {
			t.Error("a non-trigger started the agent")
		}
	}
}

// The session an agent returned is the one the next runs are given, across
// runs and a restart of the daemon.
func TestSessionRoundTrip(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	in.Post("local:main", "Owner", "session")
	in.WaitFor("local:main", e2e.Equals("session: none"))
	in.Post("local:main", "Owner", "echo first")
	in.WaitFor("local:main", e2e.Equals("echo: first"))
	isSession := func(s string) bool { return strings.HasPrefix(s, "session: sess-") }
	in.Post("local:main", "Owner", "session")
	first := in.WaitNext("local:main", isSession).Text
	in.Post("local:main", "Owner", "echo second")
	in.WaitFor("local:main", e2e.Equals("echo: second"))
	in.Post("local:main", "Owner", "session")
	if again := in.WaitNext("local:main", isSession).Text; again != first {
		t.Errorf("the next run got %q, want the same session (%q)", again, first)
	}
	p.Stop()
	in.Start()
	in.Post("local:main", "Owner", "session")
	if restarted := in.WaitNext("local:main", isSession).Text; restarted != first {
		t.Errorf("after a restart the run got %q, want the same session (%q)", restarted, first)
	}
}

func TestMaxConcurrent(t *testing.T) {
	counts := t.TempDir()
	wrapper := filepath.Join(t.TempDir(), "agent.sh")
	// Each run marks itself running, records how many are, then hands over
	// to the stand-in agent (stdin passes through).
	os.WriteFile(wrapper, []byte(`#!/bin/sh
me=$(mktemp "$NC_COUNT_DIR/run.XXXXXX") # not $$: each run has a PID namespace of its own
ls "$NC_COUNT_DIR" | grep -c '^run\.' >> "$NC_COUNT_DIR/counts"
`+e2e.Testagent(t)+`
rc=$?
rm -f "$me"
exit $rc
`), 0o755)
	// Confined groups see the count dir and the stand-in agent only because
	// the config allows them.
	// Of maxConcurrent 3, one slot is kept for the main group: the four
	// other groups share two.
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(wrapper) + `], "maxConcurrent": 3, "env": ["NC_COUNT_DIR"]`,
		Env:      []string{"NC_COUNT_DIR=" + counts},
		Security: `"allowWrite": [` + e2e.Quote(e2e.Shared(t, counts)) + `], "allowRead": [` + e2e.Quote(e2e.Testagent(t)) + `]`})
	in.AddGroup("local:main", "main", "--main")
	for i := 1; i <= 4; i++ {
		in.AddGroup(fmt.Sprintf("local:g%d", i), fmt.Sprintf("g%d", i), "--no-trigger")
	}
	in.Start()
	for i := 1; i <= 4; i++ {
		in.Post(fmt.Sprintf("local:g%d", i), "U", "sleep 1.5")
	}
	done := map[string]bool{}
	var after int64
	deadline := time.Now().Add(60 * time.Second)
	for len(done) < 4 && time.Now().Before(deadline) {
		for _, m := range in.SentAfter(after, 5*time.Second) {
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
		t.Errorf("%d other groups' agents ran at once with maxConcurrent 3 (%q)", peak, data)
	}
	if peak < 2 {
		t.Errorf("never ran 2 agents at once (%q)", data)
	}
}

func TestHungAgentKilledAndGroupRecovers(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "timeout": "1s"`})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "hang")
	// Wait for the first attempt to be under way, then ask for something
	// else: the retry carries both messages and answers the last.
	e2e.WaitFile(t, filepath.Join(in.Dir, "groups", "main", "logs"), "")
	in.Post("local:main", "Owner", "echo recovered")
	in.WaitFor("local:main", e2e.Equals("echo: recovered"))
	e2e.WaitNoProcs(t, e2e.Testagent(t), "stand-in agents")
}

func TestCrashingAgentRetriedThenReported(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "crash")
	all := in.WaitFor("local:main", func(s string) bool { return strings.Contains(s, "could not answer") })
	msg := e2e.InChat(all, "local:main")
	if len(msg) != 1 || !strings.Contains(msg[0], "status 3") {
		t.Errorf("report: %q", msg)
	}
	logs, _ := filepath.Glob(filepath.Join(in.Dir, "groups", "main", "logs", "*.log"))
	if len(logs) != 6 {
		t.Errorf("%d runs, want 1 + 5 retries", len(logs))
	}
	// The group works again afterwards, and the crash is not replayed.
	in.Post("local:main", "Owner", "echo fine")
	in.WaitFor("local:main", e2e.Equals("echo: fine"))
}

func TestKill9MidRunAnsweredOnce(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	in.Post("local:main", "Owner", "sleep 2")
	// Mid-run means the agent is running and has not answered, and its
	// run log is there (it is made while the agent starts).
	agent := e2e.Testagent(t)
	e2e.WaitProcs(t, agent, "the agent")
	logs := filepath.Join(in.Dir, "groups", "main", "logs", "*.log")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if made, _ := filepath.Glob(logs); len(made) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no run log while the agent runs")
		}
	}
	p.Kill9()
	in.Start()
	in.WaitFor("local:main", e2e.Equals("slept 2"))
	e2e.WaitNoProcs(t, agent, "agent processes after the kill -9 and the restart")
	// The answer came from a second run: the first died with the daemon.
	if made, _ := filepath.Glob(logs); len(made) < 2 {
		t.Errorf("%d run(s): the kill -9 did not cut a run short", len(made))
	}
	// Anything doubled would have been sent right behind it.
	in.Post("local:main", "Owner", "echo after")
	all := in.WaitFor("local:main", e2e.Equals("echo: after"))
	count := 0
	for _, s := range e2e.InChat(all, "local:main") {
		if s == "slept 2" {
			count++
		}
	}
	if count != 1 {
		t.Errorf("answered %d times: %q", count, e2e.InChat(all, "local:main"))
	}
}

// WhatsApp enabled but never paired: the daemon says so and keeps serving
// the local channel.
func TestUnpairedWhatsAppKeepsLocalChannel(t *testing.T) {
	in := e2e.New(t, e2e.Options{Channels: `"whatsapp": {"enabled": true}`})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	in.Post("local:main", "Owner", "echo still here")
	in.WaitFor("local:main", e2e.Equals("echo: still here"))
	// The WhatsApp channel finds it is not paired on its own time.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.Out.String(), "whatsapp login") {
		if time.Now().After(deadline) {
			t.Fatalf("no hint to pair: %s", p.Out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConfigReload(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	src, _ := os.ReadFile(in.Config)
	// A valid edit applies to the next run; a key read only at start
	// (assistantName) keeps its running value.
	edited := strings.Replace(string(src), "{", `{"assistantName": "Bob", "hostSecurity": {"tools": ["Read"]},`, 1)
	os.WriteFile(in.Config, []byte(edited), 0o600)
	deadline := time.Now().Add(30 * time.Second)
	isStdin := func(s string) bool { return strings.Contains(s, `"assistantName"`) }
	const narrowed = `"tools":["Read","mcp__nanoclaw__*"]`
	var stdin string
	for {
		in.Post("local:family", "Ann", "stdin")
		if stdin = in.WaitNext("local:family", isStdin).Text; strings.Contains(stdin, narrowed) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("valid edit never applied")
		}
	}
	if !strings.Contains(stdin, `"assistantName":"Andy"`) {
		t.Errorf("a restart-only key changed in the running daemon: %s", stdin)
	}
	// An invalid edit keeps the last good config and tells the main group
	// where the problem is.
	os.WriteFile(in.Config, []byte(strings.Replace(edited, `"alerts"`, `"alertz"`, 1)), 0o600)
	msg := in.WaitNext("local:main", func(s string) bool { return strings.Contains(s, "is invalid") }).Text
	if !strings.Contains(msg, in.Config+":4:3: unknown key \"alertz\"") {
		t.Errorf("invalid-edit notice: %q", msg)
	}
	in.Post("local:family", "Ann", "stdin")
	if !strings.Contains(in.WaitNext("local:family", isStdin).Text, narrowed) {
		t.Error("the last good config was not kept")
	}
	// The fix is confirmed in the main chat, as the error was.
	os.WriteFile(in.Config, []byte(edited), 0o600)
	in.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "nanoclawd: config OK again") })
}

func TestSingleInstance(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	p := in.Start()
	out, errs, code := e2e.Run(t, "", in.Env, "run", "--config", in.Config)
	if code == 0 {
		t.Fatal("a second daemon started on the same dataDir")
	}
	if want := fmt.Sprintf("PID %d holds", p.Cmd.Process.Pid); !strings.Contains(out+errs, want) {
		t.Errorf("second instance said %q, want it to name %q", out+errs, want)
	}
}

func TestSIGTERMLetsTheAgentFinish(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	in.Post("local:main", "Owner", "sleep 1.5")
	e2e.WaitFile(t, filepath.Join(in.Dir, "groups", "main", "logs"), "")
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not stop after SIGTERM")
	}
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM", code)
	}
	if n := e2e.CountProcs(e2e.Testagent(t)); n != 0 {
		t.Errorf("%d agents outlived the daemon", n)
	}
	// The answer went out before the daemon stopped.
	in.Start()
	var found bool
	for _, m := range in.SentAfter(0, 0) {
		found = found || m.Text == "slept 1.5"
	}
	if !found {
		t.Error("the running agent's answer was lost on shutdown")
	}
}

// A kill -9 of the daemon takes the agent with it; what the agent started
// is ended by the next start.
func TestKill9LeavesNoOrphans(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	in.Post("local:main", "Owner", "fork sleep 30")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "forked ") })
	p.Kill9()
	in.Start()
	e2e.WaitNoProcs(t, e2e.Testagent(t), "agent processes that outlived the crashed daemon and its restart")
}

// A message for a group whose agent is running reaches that agent as an
// input/ file; silence then makes the daemon ask the agent to finish.
func TestFollowUpReachesRunningAgent(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "idleTimeout": "1s"`})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family")
	in.Start()
	in.Post("local:family", "Alice", "@Andy followup")
	in.WaitNext("local:family", e2e.Equals("ready"))
	// A batch that calls the assistant goes to the running agent.
	in.Post("local:family", "Bob", "@Andy and <also> this")
	m := in.WaitNext("local:family", func(s string) bool { return strings.HasPrefix(s, "followup: ") })
	if !strings.Contains(m.Text, `sender="Bob"`) || !strings.Contains(m.Text, "and &lt;also&gt; this") || strings.Contains(m.Text, "Alice") {
		t.Errorf("follow-up: %q", m.Text)
	}
	in.WaitNext("local:family", e2e.Equals("closed"))
	// Everything was answered: a new trigger brings only itself.
	in.Post("local:family", "Carol", "@Andy prompt")
	if p := in.WaitNext("local:family", func(s string) bool { return strings.HasPrefix(s, "<messages>") }).Text; strings.Contains(p, "Bob") {
		t.Errorf("a follow-up answered in the last run was sent again:\n%s", p)
	}
}

// Secrets a service manager does not pass come from nanoclawd.env beside
// the config; a file others can read is refused.
func TestEnvFile(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "env": ["NC_TEST_SECRET"]`})
	in.AddGroup("local:main", "main", "--main")
	envFile := filepath.Join(in.Dir, "nanoclawd.env")
	os.WriteFile(envFile, []byte("# for the service\nNC_TEST_SECRET=\"s3cret value\"\n"), 0o644)
	if out, errs, code := e2e.Run(t, "", in.Env, "run", "--config", in.Config); code == 0 || !strings.Contains(out+errs, "chmod 600 "+envFile) {
		t.Fatalf("a world-readable env file was accepted: exit %d %s%s", code, out, errs)
	}
	os.Chmod(envFile, 0o600)
	in.Start()
	in.Post("local:main", "Owner", "env")
	in.WaitFor("local:main", func(s string) bool { return strings.Contains(s, "NC_TEST_SECRET=s3cret value") })
}

// Groups added and removed with the CLI take effect in the running daemon:
// the new group is answered and its IPC directory watched at once.
func TestGroupChangesReachRunningDaemon(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.AddGroup("local:late", "late")
	in.Post("local:late", "Ann", "@Andy echo hello late")
	in.WaitNext("local:late", e2e.Equals("echo: hello late"))

	bad := filepath.Join(in.Dir, "data", "ipc", "late", "messages", "x.json")
	os.MkdirAll(filepath.Dir(bad), 0o700)
	os.WriteFile(bad+".tmp", []byte("{not json"), 0o600)
	os.Rename(bad+".tmp", bad)
	e2e.WaitFile(t, filepath.Join(in.Dir, "data", "ipc", "errors"), "x.json")

	in.CLI("groups", "remove", "late")
	in.Post("local:late", "Ann", "@Andy echo gone")
	in.Post("local:main", "Owner", "echo marker")
	all := in.WaitFor("local:main", e2e.Equals("echo: marker"))
	for _, s := range e2e.InChat(all, "local:late") {
		if s == "echo: gone" {
			t.Error("a removed group was answered")
		}
	}
}

// What an agent gets on stdin is the contract's ContainerInput, and its
// sdkOptions are exactly what `security show --json` prints.
func TestContainerInputMatchesSecurityShow(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	for _, tc := range []struct{ chat, folder string }{{"local:family", "family"}, {"local:main", "main"}} {
		in.Post(tc.chat, "Ann", "stdin")
		raw := in.WaitNext(tc.chat, func(s string) bool { return strings.HasPrefix(s, "{") }).Text
		var input struct {
			Prompt        string          `json:"prompt"`
			GroupFolder   string          `json:"groupFolder"`
			ChatJID       string          `json:"chatJid"`
			IsMain        bool            `json:"isMain"`
			AssistantName string          `json:"assistantName"`
			Security      json.RawMessage `json:"security"`
			SDKOptions    any             `json:"sdkOptions"`
		}
		if err := json.Unmarshal([]byte(raw), &input); err != nil {
			t.Fatalf("stdin is not JSON: %v\n%s", err, raw)
		}
		var shown struct {
			SDKOptions any `json:"sdkOptions"`
		}
		if err := json.Unmarshal([]byte(in.CLI("security", "show", tc.folder, "--json")), &shown); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(input.SDKOptions, shown.SDKOptions) {
			t.Errorf("%s: the agent got sdkOptions\n%v\nbut security show prints\n%v", tc.folder, input.SDKOptions, shown.SDKOptions)
		}
		isMain := tc.folder == "main"
		if input.GroupFolder != tc.folder || input.ChatJID != tc.chat || input.IsMain != isMain || input.AssistantName != "Andy" ||
			!strings.Contains(input.Prompt, `sender="Ann"`) || (len(input.Security) == 0) == !isMain {
			t.Errorf("%s: ContainerInput %s", tc.folder, raw)
		}
	}
}
