package e2e_test

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// The confinement attacked from outside the layer it trusts: the agent is
// a hostile program with no SDK in between (internal/testkit/hostileagent). As a
// non-main group it tries to read canaries planted in the owner's home, the
// config and nanoclawd.env, the daemon's SQLite files and log, other
// groups' folders, sessions and IPC, a removed group's folder, every
// /proc/*/environ and /etc/shadow; to write outside its folder; and to
// reach a listener on the host's loopback directly and through the proxy
// it is offered. Secrets of agent.env (a GitHub token, a database password,
// …) never reach it. Everything it gets hold of goes into its reply. The same
// program as the main group finds the canaries, so the probe works.
func TestHostileAgentIsConfined(t *testing.T) {
	canary := "CANARY-" + randHex(t)
	realKey := "sk-ant-real-" + randHex(t)
	home := t.TempDir()
	dir := t.TempDir()
	plant := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text+" "+canary+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{".ssh/id_rsa", ".claude/.credentials.json", ".bash_history", ".netrc", ".git-credentials", "notes.txt"} {
		plant(filepath.Join(home, f), f)
	}
	plant(filepath.Join(dir, "nanoclawd.env"), "NC_ENVFILE_CANARY=")
	plant(filepath.Join(dir, "groups", "other", "notes.md"), "other's notes")
	plant(filepath.Join(dir, "groups", "removed", "notes.md"), "a removed group's notes")
	plant(filepath.Join(dir, "data", "sessions", "other", "transcript.jsonl"), "other's session")
	plant(filepath.Join(dir, "data", "ipc", "other", "messages", "pending.json.tmp"), "other's IPC")
	plant(filepath.Join(dir, ".env"), "TOKEN=")
	// The shared memory: readable by the group, not writable.
	globalNotes := filepath.Join(dir, "groups", "global", "CLAUDE.md")
	os.MkdirAll(filepath.Dir(globalNotes), 0o755)
	os.WriteFile(globalNotes, []byte("shared notes\n"), 0o644)

	var accepted atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Write([]byte("host listener " + canary + "\n"))
			c.Close()
		}
	}()

	data, groups := filepath.Join(dir, "data"), filepath.Join(dir, "groups")
	reads := []string{home, filepath.Join(dir, "nanoclawd.env"), filepath.Join(dir, "nanoclaw.config.jsonc"),
		filepath.Join(dir, ".env"), data, groups, filepath.Join(groups, "global", "CLAUDE.md")}
	outside := []string{filepath.Join(dir, "escape.txt"), filepath.Join(home, "escape.txt"),
		filepath.Join(groups, "other", "escape.txt"), filepath.Join(data, "ipc", "other", "messages", "escape.json"),
		filepath.Join(groups, "family", "logs", "escape.txt"), filepath.Join(groups, "family", ".git")}
	overwrite := []string{globalNotes}
	in := e2e.New(t, e2e.Options{
		Dir:  dir,
		Home: home,
		Agent: `"command": [` + e2e.Quote(e2e.Bin(t, "internal/testkit/hostileagent")) + `],
			"env": ["ANTHROPIC_API_KEY", "HOSTILE_READ", "HOSTILE_WRITE", "HOSTILE_DIAL",
				"GITHUB_TOKEN", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "GCP_CREDENTIALS", "OPENAI_API_KEY"]`,
		Env: []string{
			"ANTHROPIC_API_KEY=" + realKey,
			// Secrets of agent.env that are no model credential: held back.
			"GITHUB_TOKEN=ghp-" + canary, "DB_PASSWORD=pw-" + canary, "AWS_SECRET_ACCESS_KEY=aws-" + canary,
			"GCP_CREDENTIALS=gcp-" + canary, "OPENAI_API_KEY=sk-" + canary,
			"HOSTILE_READ=" + strings.Join(reads, "\n"),
			"HOSTILE_WRITE=" + strings.Join(append(outside, overwrite...), "\n"),
			"HOSTILE_DIAL=" + ln.Addr().String(),
		},
	})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.AddGroup("local:other", "other")
	in.Start()
	// Said in a trigger group without the trigger: stored, no run.
	in.Post("local:other", "Bob", "the safe code is "+canary)

	in.Post("local:family", "Eve", "go")
	reply := in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "ENV ") })
	got := strings.Join(e2e.InChat(reply, "local:family"), "\n")
	t.Logf("what the confined agent found:\n%.4000s", got)
	for _, secret := range []string{canary, realKey} {
		if strings.Contains(got, secret) {
			t.Errorf("the confined agent got hold of %s:\n%s", secret, got)
		}
	}
	wants := []string{"READ /etc/shadow: refused", "PROXY CONNECT " + ln.Addr().String() + ": 403"}
	if runtime.GOOS == "linux" { // capabilities are Linux's (/proc/self/status)
		wants = append(wants, "CapEff:\t0000000000000000")
	}
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("confined agent's report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Uid:\t0\t") {
		t.Errorf("the confined agent runs as root:\n%s", got)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's loopback listener took %d connections from the confined agent", n)
	}
	for _, p := range outside {
		if fi, err := os.Stat(p); err == nil && !(fi.IsDir() && p == filepath.Join(groups, "family", ".git")) {
			t.Errorf("the confined agent wrote %s", p)
		}
	}
	if b, _ := os.ReadFile(globalNotes); string(b) != "shared notes\n" {
		t.Errorf("the confined agent changed the shared memory: %q", b)
	}
	if !strings.Contains(got, "READ "+globalNotes+": ok") {
		t.Errorf("the confined agent could not read the shared memory:\n%s", got)
	}
	// The run ends just after its reply: then the placeholder that kept the
	// group from making a .git is gone again.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(groups, "family", ".git")); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("a placeholder .git was left in the group's folder after the run")
			break
		}
	}
	in.WaitFor("local:main", func(s string) bool {
		return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, "family") && strings.Contains(s, "127.0.0.1")
	})

	// The probe works: unconfined, the same program finds what family could not.
	in.Post("local:main", "Owner", "go")
	all := in.WaitFor("local:main", func(s string) bool { return strings.Contains(s, "ENV ") })
	mainGot := strings.Join(e2e.InChat(all, "local:main"), "\n")
	for _, want := range []string{canary, realKey, filepath.Join(home, ".ssh", "id_rsa") + ": ok", "DIAL " + ln.Addr().String() + ": ok"} {
		if !strings.Contains(mainGot, want) {
			t.Errorf("as main the probe did not find %q, so the test proves nothing:\n%.3000s", want, mainGot)
		}
	}
}

func randHex(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// A confined run is held to its limits: processes and file size by the
// kernel (the command fails), memory and the folder's size by the daemon,
// which stops the run and alerts the main group.
func TestConfinedRunLimits(t *testing.T) {
	install := func(t *testing.T, env ...string) *e2e.Install {
		in := e2e.New(t, e2e.Options{
			Agent: `"command": [` + e2e.Quote(e2e.Bin(t, "internal/testkit/hostileagent")) + `],
				"env": ["HOSTILE_FORKS", "HOSTILE_BIGFILE", "HOSTILE_FILL", "HOSTILE_MEM", "HOSTILE_MEMFD"],
				"limits": {"processes": 32, "fileSizeMiB": 8, "tmpMiB": 64, "memoryMiB": 128, "diskMiB": 16}`,
			Env: env,
		})
		in.AddGroup("local:main", "main", "--main")
		in.AddGroup("local:family", "family", "--no-trigger")
		in.Start()
		return in
	}
	t.Run("file size", func(t *testing.T) {
		in := install(t, "HOSTILE_BIGFILE=20")
		in.Post("local:family", "Eve", "go")
		got := strings.Join(e2e.InChat(in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "BIGFILE") }), "local:family"), "\n")
		// The run's /tmp: private on Linux, its TMPDIR on macOS.
		if !strings.Contains(got, "BIGFILE 8 of 20 MiB: write ") || !strings.Contains(got, "/big: file too large") {
			t.Errorf("the file size limit did not hold:\n%s", got)
		}
	})
	t.Run("processes", func(t *testing.T) {
		in := install(t, "HOSTILE_FORKS=100")
		in.Post("local:family", "Eve", "go")
		got := strings.Join(e2e.InChat(in.WaitFor("local:family", func(s string) bool {
			return strings.Contains(s, "FORKS") || strings.Contains(s, "could not answer")
		}), "local:family"), "\n")
		if strings.Contains(got, "FORKS 100 of 100") || !strings.Contains(got, "FORKS") {
			// As root, RLIMIT_NPROC does not hold: the daemon's watch stops
			// the run, after the agent's report or (on a busy machine) before it.
			in.WaitFor("local:main", func(s string) bool {
				return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, `"family"`) && strings.Contains(s, "processes limit")
			})
			e2e.WaitNoProcs(t, e2e.Bin(t, "internal/testkit/hostileagent"), "the stopped run")
		}
	})
	for _, c := range []struct{ name, env, limit string }{
		{"disk", "HOSTILE_FILL=40", "disk"},
		{"memory", "HOSTILE_MEM=300", "memory"},
		{"memfd", "HOSTILE_MEMFD=300", "memory"}, // shared memory no process shows as resident
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.limit == "memory" && runtime.GOOS != "linux" {
				t.Skip("needs Linux (/proc, cgroups): macOS does not limit a run's memory (docs/security.md)")
			}
			in := install(t, c.env)
			in.Post("local:family", "Eve", "go")
			in.WaitFor("local:main", func(s string) bool {
				return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, `"family"`) && strings.Contains(s, c.limit+" limit")
			})
			in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "could not answer") })
			e2e.WaitNoProcs(t, e2e.Bin(t, "internal/testkit/hostileagent"), "the stopped run")
		})
	}
}

// Without a sandbox (here: no bwrap in the daemon's PATH) a non-main run
// fails closed: it is never started unconfined, the group is told it could
// not be answered and the main group why; main itself still runs.
func TestNoSandboxFailsClosed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux (bubblewrap on PATH): macOS's sandbox-exec is part of the system, at /usr/bin")
	}
	marker := filepath.Join(t.TempDir(), "ran")
	script := filepath.Join(t.TempDir(), "agent.sh")
	os.WriteFile(script, []byte("#!/bin/sh\n/usr/bin/touch "+marker+"\nexec "+e2e.Testagent(t)+"\n"), 0o755)
	in := e2e.New(t, e2e.Options{
		Agent: `"command": ["/bin/sh", ` + e2e.Quote(script) + `]`,
		Env:   []string{"PATH=" + t.TempDir()},
	})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	in.Post("local:family", "Eve", "echo hi")
	in.WaitFor("local:main", func(s string) bool {
		return strings.Contains(s, "family") && strings.Contains(s, "was not started") && strings.Contains(s, "bubblewrap")
	})
	in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "could not answer") })
	if _, err := os.Stat(marker); err == nil {
		t.Error("the family agent ran without a sandbox")
	}
	in.Post("local:main", "Owner", "echo still here")
	in.WaitFor("local:main", e2e.Equals("echo: still here"))
	if _, err := os.Stat(marker); err != nil {
		t.Error("main's agent did not run the same command, so the check above proves nothing")
	}
}

// A kill -9 of the daemon ends a confined run at once, with nothing
// restarted to clean up: bubblewrap drops the parent-death signal, so the
// run's first process watches a pipe only the daemon holds.
func TestKill9EndsConfinedAgents(t *testing.T) {
	in := e2e.New(t, e2e.Options{StopSignal: syscall.SIGTERM})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	p := in.Start()
	in.Post("local:family", "Ann", "fork sleep 30")
	in.WaitFor("local:family", func(s string) bool { return strings.HasPrefix(s, "forked ") })
	p.Kill9()
	e2e.WaitNoProcs(t, e2e.Testagent(t), "confined agents after a kill -9 of their daemon")
	// Their gateway sockets stay behind; the next daemon sweeps them.
	sockets := filepath.Join(in.Layout().Gateways(), "*.sock")
	if left, _ := filepath.Glob(sockets); len(left) == 0 {
		t.Fatal("the kill -9 left no gateway socket behind: nothing for the next start to sweep")
	}
	in.Start().Stop()
	if left, _ := filepath.Glob(sockets); len(left) > 0 {
		t.Errorf("gateway sockets after a restart and a clean stop: %v", left)
	}
}

// Each confined run's gateway socket is made while the run before it
// starts; a clean stop removes the one made for a run that never came.
func TestCleanStopLeavesNoGatewaySocket(t *testing.T) {
	in := e2e.New(t, e2e.Options{StopSignal: syscall.SIGTERM})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	p := in.Start()
	for _, text := range []string{"one", "two"} {
		in.Post("local:family", "Ann", text)
		in.WaitFor("local:family", e2e.Equals("echo: "+text))
	}
	p.Stop()
	if left, _ := filepath.Glob(filepath.Join(in.Layout().Gateways(), "*")); len(left) > 0 {
		t.Errorf("left in the gateway directory after a clean stop: %v", left)
	}
}

// A missing protected name is kept from the group in every run: the
// second run's placeholders, moved back in from the daemon's keep, hold
// as the first run's did, and none stays in the folder between runs.
func TestMissingProtectedNamesHoldEveryRun(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "timeout": "60s", "idleTimeout": "100ms"`})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()
	folder := filepath.Join(in.Dir, "groups", "family")
	for run := 1; run <= 2; run++ {
		for _, name := range []string{".envrc", ".vscode"} {
			in.Post("local:family", "Ann", "plant /etc/passwd "+name)
			if reply := in.WaitNext("local:family", func(s string) bool { return strings.HasPrefix(s, "plant") }); !strings.HasPrefix(reply.Text, "plant error") {
				t.Errorf("run %d: the group planted its own %s: %q", run, name, reply.Text)
			}
		}
		// The run ends once idle: its placeholders leave the folder.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, err1 := os.Lstat(filepath.Join(folder, ".envrc"))
			_, err2 := os.Lstat(filepath.Join(folder, ".vscode"))
			if os.IsNotExist(err1) && os.IsNotExist(err2) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d: placeholders left in the folder: %v, %v", run, err1, err2)
			}
		}
	}
	if kept, _ := os.ReadDir(in.Layout().Placeholders()); len(kept) == 0 {
		t.Error("no placeholder kept for the next run")
	}
}
