package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/e2e"
)

// End-to-end tests of a conversation as a NanoClaw user expects it: turns,
// sessions, triggers, persona.

func agentOpts(t *testing.T, extra string) e2e.Options {
	return e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], ` + extra}
}

// failedNotice reports whether s is the group's "could not answer" notice.
func failedNotice(s string) bool { return strings.Contains(s, "could not answer") }

// agent.timeout bounds one turn: an agent still answering well past it is
// not killed, and one that answered and then hangs is ended without the
// chat being told it failed.
func TestTimeoutBoundsOneTurn(t *testing.T) {
	in := e2e.New(t, agentOpts(t, `"timeout": "1s", "idleTimeout": "30s"`))
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "ticks 5 0.5")
	in.WaitNext("local:main", e2e.Equals("tick 5"))

	in.Post("local:main", "Owner", "fork hang")
	in.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "forked ") })
	e2e.WaitNoProcs(t, e2e.Testagent(t), "stand-in agents")
	in.Post("local:main", "Owner", "echo after")
	in.WaitNext("local:main", e2e.Equals("echo: after"))
	for _, s := range e2e.InChat(in.AllSent(), "local:main") {
		if failedNotice(s) {
			t.Errorf("a timeout after an answer was reported as a failure: %q", s)
		}
	}
}

// The idle timeout ends a quiet agent through _close: it says goodbye and
// exits on its own.
func TestIdleTimeoutClosesCleanly(t *testing.T) {
	in := e2e.New(t, agentOpts(t, `"timeout": "60s", "idleTimeout": "1s"`))
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "followup")
	in.WaitNext("local:main", e2e.Equals("ready"))
	in.WaitNext("local:main", e2e.Equals("closed"))
	e2e.WaitNoProcs(t, e2e.Testagent(t), "stand-in agents")
}

// sessionOf asks the agent which session it was given.
func sessionOf(t *testing.T, in *e2e.Install, chat string) string {
	t.Helper()
	in.Post(chat, "Owner", "session")
	return strings.TrimPrefix(in.WaitNext(chat, func(s string) bool { return strings.HasPrefix(s, "session: ") }).Text, "session: ")
}

// A session whose transcript is gone does not lock the group: the run
// starts fresh once with the same message, and the new session sticks.
// reset-session and the /new word start the next run fresh too.
func TestSessionsRecoverAndReset(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "echo one")
	in.WaitNext("local:main", e2e.Equals("echo: one"))
	first := sessionOf(t, in, "local:main")
	if !strings.HasPrefix(first, "sess-") {
		t.Fatalf("no session kept: %q", first)
	}

	// The CLI pruned the transcript: the message is still answered.
	if err := os.Remove(filepath.Join(in.Dir, "data", "sessions", "main", first)); err != nil {
		t.Fatal(err)
	}
	in.Post("local:main", "Owner", "echo still here")
	in.WaitNext("local:main", e2e.Equals("echo: still here"))
	second := sessionOf(t, in, "local:main")
	if !strings.HasPrefix(second, "sess-") || second == first {
		t.Fatalf("session after recovery %q (lost one %q)", second, first)
	}
	log, _ := os.ReadFile(filepath.Join(in.Dir, "data", "logs", "nanoclawd.log"))
	if !strings.Contains(string(log), "the saved agent session is gone") {
		t.Error("the lost session was not logged")
	}

	// reset-session, with the daemon running.
	if out := in.CLI("groups", "reset-session", "main"); !strings.Contains(out, "fresh") {
		t.Errorf("reset-session said %q", out)
	}
	if s := sessionOf(t, in, "local:main"); s != "none" {
		t.Errorf("after reset-session the run got session %q", s)
	}
	if _, errs, code := e2e.Run(t, "", in.Env, "groups", "reset-session", "nosuch", "--config", in.Config); code == 0 || !strings.Contains(errs, "nosuch") {
		t.Errorf("reset-session of an unknown group: exit %d, %q", code, errs)
	}

	// /new in the chat: acknowledged, not sent to the agent, and the next
	// run is fresh.
	in.Post("local:main", "Owner", "echo three")
	in.WaitNext("local:main", e2e.Equals("echo: three"))
	if s := sessionOf(t, in, "local:main"); !strings.HasPrefix(s, "sess-") {
		t.Fatalf("no session before /new: %q", s)
	}
	in.Post("local:main", "Owner", "/new")
	in.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "Starting a fresh conversation") })
	in.Post("local:main", "Owner", "prompt")
	if p := in.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "<messages>") }).Text; strings.Contains(p, "/new") {
		t.Errorf("the /new message reached the agent:\n%s", p)
	}
	if s := sessionOf(t, in, "local:main"); s != "none" {
		t.Errorf("after /new the run got session %q", s)
	}
}
