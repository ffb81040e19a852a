package daemon_test

import (
	"os"
	"path/filepath"
	"slices"
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
	if p := in.WaitNext("local:main", func(s string) bool { return strings.Contains(s, "<messages>") }).Text; strings.Contains(p, "/new") {
		t.Errorf("the /new message reached the agent:\n%s", p)
	}
	if s := sessionOf(t, in, "local:main"); s != "none" {
		t.Errorf("after /new the run got session %q", s)
	}
}

// The prompt: a timezone header and local times; the newest
// agent.maxPromptMessages messages; TZ in the agent's environment.
func TestPromptTimezoneAndCap(t *testing.T) {
	o := agentOpts(t, `"timeout": "60s", "maxPromptMessages": 3`)
	o.Top = `"timezone": "Asia/Kolkata",`
	in := e2e.New(t, o)
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family")
	in.Start()
	for _, s := range []string{"m1", "m2", "m3", "m4"} {
		in.Post("local:family", "Alice", s)
	}
	in.Post("local:family", "Bob", "@Andy prompt")
	p := in.WaitNext("local:family", func(s string) bool { return strings.Contains(s, "<messages>") }).Text
	if !strings.HasPrefix(p, `<context timezone="Asia/Kolkata" />`+"\n<messages>\n") || !strings.Contains(p, `+05:30">m3</message>`) {
		t.Errorf("no timezone header or local times:\n%s", p)
	}
	if strings.Contains(p, ">m1<") || strings.Contains(p, ">m2<") || strings.Count(p, "<message ") != 3 {
		t.Errorf("more than the newest 3 messages:\n%s", p)
	}
	// Those left out count as answered: the next prompt does not bring them.
	in.Post("local:family", "Bob", "@Andy prompt")
	if p := in.WaitNext("local:family", func(s string) bool { return strings.Contains(s, "<messages>") }).Text; strings.Count(p, "<message ") != 1 {
		t.Errorf("second prompt:\n%s", p)
	}
	in.Post("local:main", "Owner", "env")
	if env := in.WaitNext("local:main", func(s string) bool { return strings.Contains(s, "NANOCLAW_GROUP_FOLDER=") }).Text; !slices.Contains(strings.Split(env, "\n"), "TZ=Asia/Kolkata") {
		t.Errorf("agent environment lacks TZ:\n%s", env)
	}
}

// senders in a group's override: only they trigger the agent; the others'
// messages stay context, and their /new does nothing.
func TestSenderAllowlist(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family")
	override := filepath.Join(in.Dir, "family.json")
	if err := os.WriteFile(override, []byte(`{"senders": ["Alice", "+4915551234567"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	in.CLI("groups", "set-security", "family", "--file", override)
	in.Start()
	in.Post("local:family", "Mallory", "@Andy echo mallory")
	in.Post("local:family", "Mallory", "/new")
	in.Post("local:main", "Owner", "echo barrier")
	in.WaitNext("local:main", e2e.Equals("echo: barrier"))
	in.Post("local:family", "Alice", "@Andy prompt")
	p := in.WaitNext("local:family", func(s string) bool { return strings.Contains(s, "<messages>") }).Text
	if !strings.Contains(p, "@Andy echo mallory") || !strings.Contains(p, ">/new<") {
		t.Errorf("Mallory's messages are not context:\n%s", p)
	}
	for _, s := range e2e.InChat(in.AllSent(), "local:family") {
		if s == "echo: mallory" || strings.HasPrefix(s, "Starting a fresh") {
			t.Errorf("a sender outside the allowlist was obeyed: %q", s)
		}
	}
	// An empty list is refused with the fix.
	if err := os.WriteFile(override, []byte(`{"senders": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := e2e.Run(t, "", in.Env, "groups", "set-security", "family", "--file", override, "--config", in.Config); code == 0 || !strings.Contains(errs, "remove the key") {
		t.Errorf("empty senders: exit %d, %q", code, errs)
	}
}
