package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/nanoclawd/nanoclawd/internal/setup"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mock"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// fakeNanoclawdEnv makes the test binary run as nanoclawd (see TestMain).
const fakeNanoclawdEnv = "NANOCLAWD_TEST_AS_NANOCLAWD"

// fakeOwn is the account the fake pairing links.
const fakeOwn = "491701234567@s.whatsapp.net"

// fakePairer stands in for the WhatsApp login: Pair shows a fake code and
// "links" at once, leaving a file so a later run finds it paired.
func fakePairer(dataDir string) setup.Pairer {
	marker := filepath.Join(dataDir, "fake-paired")
	return &mock.Pairer{
		PairedFn: func(context.Context) (string, bool, error) {
			b, err := os.ReadFile(marker)
			return string(b), err == nil, nil
		},
		PairFn: func(_ context.Context, phone string, out io.Writer) (string, error) {
			fmt.Fprintf(out, "FAKE QR CODE (phone %q)\n", phone)
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return "", err
			}
			return fakeOwn, os.WriteFile(marker, []byte(fakeOwn), 0o600)
		},
	}
}

// terminal is a program running in a pseudo-terminal, read as a person
// would: wait until some text appears, then type.
type terminal struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	tty  *os.File
	done chan struct{}

	mu   sync.Mutex
	out  bytes.Buffer
	seen int // Expect consumed the output up to here
	more chan struct{}
}

// startTerminal runs this test binary as nanoclawd, its WhatsApp pairing faked.
func startTerminal(t *testing.T, name, dir string, env []string, args ...string) *terminal {
	t.Helper()
	return startProgram(t, name, dir, append(slices.Clip(env), fakeNanoclawdEnv+"=1"), self(t), args...)
}

// startProgram runs prog (relative to dir, if it is relative) in a
// pseudo-terminal.
func startProgram(t *testing.T, name, dir string, env []string, prog string, args ...string) *terminal {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir, cmd.Env = dir, env
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, name: name, cmd: cmd, tty: tty, done: make(chan struct{}), more: make(chan struct{}, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			select {
			case term.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { cmd.Wait(); close(term.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-term.done
		tty.Close()
		if t.Failed() {
			t.Logf("%s's terminal:\n%s", name, term.text())
		}
	})
	return term
}

func (term *terminal) text() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// Expect waits until want appears after what earlier Expects matched, and
// returns the text up to and including it.
func (term *terminal) Expect(want string) string {
	term.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		term.mu.Lock()
		all := term.out.String()
		from := term.seen
		if i := strings.Index(all[from:], want); i >= 0 {
			term.seen = from + i + len(want)
			term.mu.Unlock()
			return all[from:term.seen]
		}
		term.mu.Unlock()
		select {
		case <-term.more:
		case <-deadline:
			term.t.Fatalf("%s: %q did not appear; after the last match it showed:\n%s", term.name, want, all[from:])
		}
	}
}

// Type types line and Enter.
func (term *terminal) Type(line string) {
	term.t.Helper()
	if _, err := term.tty.Write([]byte(line + "\r")); err != nil {
		term.t.Fatal(err)
	}
}

// Exit waits for the program to end and returns its exit code.
func (term *terminal) Exit() int {
	term.t.Helper()
	select {
	case <-term.done:
	case <-time.After(60 * time.Second):
		term.t.Fatalf("%s did not exit:\n%s", term.name, term.text())
	}
	return term.cmd.ProcessState.ExitCode()
}

// self is this test binary, which runs as nanoclawd: the guide's hints
// name it by its path.
func self(t *testing.T) string {
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeAPI answers the credential check: only key is accepted.
func fakeAPI(t *testing.T, key string) *httptest.Server {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("x-api-key") != key {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		io.WriteString(w, `{"data":[{"id":"claude-test"}]}`)
	}))
	t.Cleanup(api.Close)
	return api
}

// emptyInstall is an empty directory with only a config: WhatsApp on (its
// pairing faked), the local channel on, the stand-in agent.
func emptyInstall(t *testing.T) (dir, cfg string, env []string) {
	dir = t.TempDir()
	sockDir, err := os.MkdirTemp("", "nc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	cfg = filepath.Join(dir, "nanoclaw.config.jsonc")
	body := fmt.Sprintf(`{
		"channels": {"local": {"enabled": true, "socket": %s}},
		"agent": {"command": [%s], "env": ["ANTHROPIC_API_KEY"]},
	}`, e2e.Quote(filepath.Join(sockDir, "s")), e2e.Quote(e2e.Testagent(t)))
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o700)
	env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=xterm"}
	return dir, cfg, env
}

// TestFirstRunOnTerminal is a new owner's first 'nanoclawd run' on a
// terminal, from a directory with nothing but a config: the daemon lists
// what is missing, pairs WhatsApp, registers the chosen main chat, takes
// and checks the API key, says what to send, starts, and answers it over
// the local channel; 'nanoclawd status' then shows that run, and
// 'nanoclawd setup' afterwards finds nothing left to do.
func TestFirstRunOnTerminal(t *testing.T) {
	dir, cfg, env := emptyInstall(t)
	const key = "sk-ant-api03-good"
	env = append(env, "ANTHROPIC_BASE_URL="+fakeAPI(t, key).URL)

	run := startTerminal(t, "nanoclawd run", dir, env, "run")
	intro := run.Expect("Pair WhatsApp now")
	for _, want := range []string{"3 thing(s) stand between", "1. whatsapp: WhatsApp is not paired", "2. main chat: no main chat", "3. credential: no model credential"} {
		if !strings.Contains(intro, want) {
			t.Errorf("the first-run list lacks %q:\n%s", want, intro)
		}
	}
	run.Type("q")
	run.Expect("FAKE QR CODE")
	run.Expect("✓ WhatsApp: paired as +491701234567")
	choices := run.Expect("Choice [1]: ")
	if !strings.Contains(choices, "1) your own WhatsApp chat, +491701234567") || !strings.Contains(choices, "2) a chat on the local channel, local:main") {
		t.Errorf("main chat choices:\n%s", choices)
	}
	run.Type("2")
	run.Expect("✓ main chat: Main (local) (local:main), folder main")
	run.Expect("Press Enter to skip: ")
	run.Type("sk-ant-api03-wrong")
	run.Expect("the API rejected it (401 Unauthorized: invalid x-api-key); try again")
	run.Expect("Press Enter to skip: ")
	run.Type(key)
	run.Expect("✓ model credential: ANTHROPIC_API_KEY saved in " + filepath.Join(dir, "nanoclawd.env") + ", accepted by the API")
	if strings.Contains(run.text(), "wrong") || strings.Contains(run.text(), key) {
		t.Errorf("a pasted credential was echoed on the terminal:\n%s", run.text())
	}
	// The last line is the command, as typed here (the config is the
	// default one in this directory).
	if first := run.Expect("chat --chat local:main\r\n"); !strings.Contains(first, "run this in a second terminal, then type: hello Andy\r\n"+self(t)+" chat --chat local:main") {
		t.Errorf("the first-answer lines: %q", first)
	}
	run.Expect("nanoclawd running")

	envFile, err := os.ReadFile(filepath.Join(dir, "nanoclawd.env"))
	if err != nil || string(envFile) != "ANTHROPIC_API_KEY="+key+"\n" {
		t.Errorf("nanoclawd.env = %q, %v", envFile, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "nanoclawd.env")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("nanoclawd.env mode: %v %v", fi.Mode(), err)
	}

	// The first answer, typed as the line says, in a second terminal.
	chat := startTerminal(t, "nanoclawd chat", dir, env, "chat", "--chat", "local:main", "--config", cfg)
	chat.Expect("type a message and press Enter")
	chat.Type("hello Andy")
	chat.Expect("Andy: echo: hello Andy")
	// The key taken during the first run reached the agent's relay: the
	// agent holds the placeholder that stands for it.
	chat.Type("env")
	chat.Expect("ANTHROPIC_API_KEY=nanoclaw-placeholder-anthropic-api-key-")

	// status, from the daemon itself.
	out, errs, code := runAsNanoclawd(t, dir, env, "status", "--json")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errs)
	}
	var rep status.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if len(rep.Groups) != 1 || rep.Groups[0].Folder != "main" || !rep.Groups[0].IsMain || rep.Groups[0].LastRun == nil || !rep.Groups[0].LastRun.OK {
		t.Errorf("status groups: %+v", rep.Groups)
	}

	// Ctrl-C stops the daemon; setup again finds everything done.
	run.tty.Write([]byte{3})
	if code := run.Exit(); code != 0 {
		t.Errorf("nanoclawd run after Ctrl-C: exit %d", code)
	}
	again := startTerminal(t, "nanoclawd setup", dir, env, "setup")
	done := again.Expect("chat --chat local:main")
	if code := again.Exit(); code != 0 {
		t.Errorf("setup again: exit %d", code)
	}
	for _, want := range []string{"Everything a first answer needs is in place", "✓ WhatsApp: paired as +491701234567", "✓ main chat: Main (local)", "✓ model credential: ANTHROPIC_API_KEY from " + filepath.Join(dir, "nanoclawd.env") + ", accepted by the API", "Start the daemon with 'make run' (or '" + self(t) + " run'"} {
		if !strings.Contains(done, want) {
			t.Errorf("setup run again lacks %q:\n%s", want, done)
		}
	}
	if strings.Contains(done, "Choice") || strings.Contains(done, "Pair WhatsApp now") {
		t.Errorf("setup asked again for what is done:\n%s", done)
	}
}

// TestFirstRunOffTerminal: started by a service manager (no terminal), the
// daemon never waits for input; it logs what is missing once and runs.
// This is the real binary with the real WhatsApp pairing check.
func TestFirstRunOffTerminal(t *testing.T) {
	in := e2e.New(t, e2e.Options{Channels: `"whatsapp": {"enabled": true}`, Home: t.TempDir()})
	p := in.Start() // returns once the daemon is up: nothing waited for input
	in.CLI("status")
	log := p.Out.String()
	for _, want := range []string{"before a first answer (1/3): WhatsApp is not paired", "before a first answer (2/3): no main chat", "before a first answer (3/3): no model credential"} {
		if strings.Count(log, want) != 1 {
			t.Errorf("want %q once in the daemon's output:\n%s", want, log)
		}
	}
	if strings.Contains(log, "Pair WhatsApp now") {
		t.Errorf("asked for input off a terminal:\n%s", log)
	}
	// The channel says it in one line, at any level (the file has them
	// all), once its goroutine got there.
	const said = "WhatsApp not paired: run `nanoclawd whatsapp login`; nanoclawd runs without it"
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		file, _ := os.ReadFile(in.Layout().DaemonLog())
		if strings.Contains(string(file), said) {
			if n := strings.Count(string(file), `"channel":"whatsapp"`); n != 1 {
				t.Errorf("%d lines of the WhatsApp channel, want one:\n%s", n, file)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the WhatsApp channel never said how to pair:\n%s", file)
		}
	}
}

// runAsNanoclawd runs this test binary as nanoclawd off a terminal.
func runAsNanoclawd(t *testing.T, dir string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	self, _ := os.Executable()
	cmd := exec.Command(self, args...)
	cmd.Dir, cmd.Env = dir, append(env, fakeNanoclawdEnv+"=1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return o.String(), e.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), 0
}

// TestSetupWhileDaemonRuns: setup done beside a running daemon registers
// the main chat in it at once, says that a daemon that started unpaired
// connects with the new pairing by itself, and that the key it saves is
// the running daemon's from its next run on, which it is.
func TestSetupWhileDaemonRuns(t *testing.T) {
	api := mockapi.New(t)
	in := e2e.New(t, e2e.Options{Channels: `"whatsapp": {"enabled": true}`, Home: t.TempDir(), Env: []string{"ANTHROPIC_BASE_URL=" + api.URL}})
	in.Start()
	setupTerm := startTerminal(t, "nanoclawd setup", in.Dir, in.Env, "setup", "--config", in.Config)
	setupTerm.Expect("Pair WhatsApp now")
	setupTerm.Type("")
	setupTerm.Expect("Choice [1]: ")
	setupTerm.Type("2")
	setupTerm.Expect("Press Enter to skip: ")
	const key = "sk-ant-api03-saved-while-running"
	setupTerm.Type(key)
	setupTerm.Expect("ANTHROPIC_API_KEY saved in")
	setupTerm.Expect("uses a key saved here from its next agent run on")
	setupTerm.Expect("started before the pairing: it connects WhatsApp with it within a few seconds")
	if code := setupTerm.Exit(); code != 0 {
		t.Fatalf("setup: exit %d", code)
	}
	if strings.Contains(setupTerm.text(), "Start the daemon") {
		t.Errorf("setup asks to start the daemon that runs:\n%s", setupTerm.text())
	}
	// The running daemon has the new main chat, and the key once its
	// watcher has read nanoclawd.env again.
	deadline := time.Now().Add(time.Minute)
	for {
		var rep status.Report
		json.Unmarshal([]byte(in.CLI("status", "--json")), &rep)
		if rep.Credential.Name == "ANTHROPIC_API_KEY" && rep.Credential.FromEnvFile {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running daemon never took the key: %+v", rep.Credential)
		}
	}
	in.Post("local:main", "Owner", "api 1")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "api 1 ok") })
	if log := api.Log(); len(log) == 0 || log[len(log)-1].Header.Get("X-Api-Key") != key {
		t.Errorf("the model API did not get the key setup saved: %d requests", len(log))
	}
}
