package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel/local"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// agent.timeout bounds one turn, not a conversation: an agent that keeps
// answering follow-ups stays up well past it, and nobody is told "could
// not answer".
func TestLiveConversationOutlivesTheTimeout(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "timeout": "2s", "idleTimeout": "60s"`})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "followup")
	in.WaitFor("local:main", e2e.Equals("ready"))
	start := time.Now()
	for i := 0; time.Since(start) < 5*time.Second; i++ {
		word := fmt.Sprintf("turn-%d", i)
		in.Post("local:main", "Owner", word)
		in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "followup:") && strings.Contains(s, word) })
	}
	for _, m := range in.AllSent() {
		if strings.Contains(m.Text, "could not answer") || m.Text == "closed" {
			t.Errorf("the conversation was cut off: %q", m.Text)
		}
	}
}

// A hard timeout that ends an agent after it answered is no failure: the
// group is not told its message could not be answered.
func TestTimeoutAfterAnswerIsNoFailure(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "timeout": "1s", "idleTimeout": "60s"`})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "answer-then-hang")
	in.WaitFor("local:main", e2e.Equals("answered"))
	e2e.WaitNoProcs(t, e2e.Testagent(t), "the agent ended by its timeout")
	in.Post("local:main", "Owner", "echo after")
	all := in.WaitFor("local:main", e2e.Equals("echo: after"))
	for _, s := range e2e.InChat(all, "local:main") {
		if strings.Contains(s, "could not answer") {
			t.Errorf("a run that answered was reported as failed: %q", s)
		}
	}
}

// A saved session whose transcript is gone does not lock the group out:
// the run starts a fresh session once and answers the same message.
// `groups reset-session` and a "/new" message start the next run fresh.
func TestSessionsRecoverAndReset(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "forget")
	in.WaitFor("local:main", e2e.Equals("forgot"))
	in.Post("local:main", "Owner", "echo still here")
	all := in.WaitFor("local:main", e2e.Equals("echo: still here"))
	for _, s := range e2e.InChat(all, "local:main") {
		if strings.Contains(s, "could not answer") {
			t.Errorf("a gone session failed the group: %q", s)
		}
	}

	in.Post("local:main", "Owner", "session")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "session: sess-") })
	if out := in.CLI("groups", "reset-session", "main"); !strings.Contains(out, "fresh agent session") {
		t.Errorf("reset-session said %q", out)
	}
	in.Post("local:main", "Owner", "session")
	in.WaitFor("local:main", e2e.Equals("session: none"))

	in.Post("local:main", "Owner", "echo keep")
	in.WaitFor("local:main", e2e.Equals("echo: keep"))
	in.Post("local:main", "Owner", "session")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "session: sess-") })
	in.Post("local:main", "Owner", "/new")
	in.WaitFor("local:main", func(s string) bool { return strings.HasPrefix(s, "Fresh start") })
	in.Post("local:main", "Owner", "session")
	in.WaitFor("local:main", e2e.Equals("session: none"))
}

// In a trigger group, chatter while the agent runs is not handed to it:
// it waits as context and comes along with the next message that calls the
// assistant. A prompt carries at most agent.maxPromptMessages messages, the
// newest, with local times and the time zone.
func TestTriggerGroupChatterStaysContext(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "maxPromptMessages": 3`})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family")
	in.Start()
	in.Post("local:family", "Ann", "@Andy followup")
	in.WaitFor("local:family", e2e.Equals("ready"))
	in.Post("local:family", "Bob", "just chatter")
	in.Post("local:family", "Ann", "@Andy next")
	all := in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "@Andy next") })
	for _, s := range e2e.InChat(all, "local:family") {
		if strings.HasPrefix(s, "followup:") && strings.Contains(s, "just chatter") && !strings.Contains(s, "@Andy next") {
			t.Errorf("chatter reached the running agent on its own: %q", s)
		}
	}
	if got := all[len(all)-1].Text; !strings.Contains(got, "just chatter") {
		t.Errorf("the chatter did not come along as context: %q", got)
	}
	in.Post("local:family", "Ann", "@Andy bye")
	in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "@Andy bye") })

	in.AddGroup("local:work", "work")
	for i := 1; i <= 5; i++ {
		in.Post("local:work", "Bob", fmt.Sprintf("note %d", i)) // context, no run
	}
	in.Post("local:work", "Bob", "@Andy prompt")
	p := in.WaitFor("local:work", func(s string) bool { return strings.Contains(s, "<context timezone=") })
	prompt := p[len(p)-1].Text
	if n := strings.Count(prompt, "<message "); n != 3 || !strings.Contains(prompt, ">note 4<") || !strings.Contains(prompt, ">@Andy prompt<") {
		t.Errorf("prompt holds %d messages, want the newest 3:\n%s", n, prompt)
	}
	if log, _ := os.ReadFile(in.Layout().DaemonLog()); !strings.Contains(string(log), `"messages":6,"kept":3`) {
		t.Error("the daemon's log does not say that 3 older messages were left out of the prompt")
	}
}

// A group's senders allowlist: only those may call the assistant; what
// others say stays context and comes along with the next allowed call.
func TestSendersAllowlist(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family")
	override := filepath.Join(t.TempDir(), "override.json")
	os.WriteFile(override, []byte(`{"senders": ["alice"]}`), 0o600)
	in.CLI("groups", "set-security", "family", "--file", override)
	in.Start()
	in.Post("local:family", "bob", "@Andy echo from bob")
	// A whole run of the main group later, bob's call has started nothing.
	in.Post("local:main", "Owner", "echo barrier")
	in.WaitFor("local:main", e2e.Equals("echo: barrier"))
	if logs, _ := filepath.Glob(filepath.Join(in.Dir, "groups", "family", "logs", "agent-*.log")); len(logs) != 0 {
		t.Fatalf("a sender not on the allowlist started the agent: %v", logs)
	}
	in.Post("local:family", "alice", "@Andy prompt")
	all := in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "<messages>") })
	got := e2e.InChat(all, "local:family")
	if len(got) != 1 || !strings.Contains(got[0], "echo from bob") {
		t.Errorf("bob's call ran the agent, or did not come along as context: %q", got)
	}

	// Nor may bob reset the conversation the allowed senders are having.
	in.Post("local:family", "alice", "@Andy echo keep")
	in.WaitFor("local:family", e2e.Equals("echo: keep"))
	in.Post("local:family", "bob", "/new")
	in.Post("local:family", "alice", "@Andy session")
	all = in.WaitFor("local:family", func(s string) bool { return strings.HasPrefix(s, "session: ") })
	if got := e2e.InChat(all, "local:family"); !strings.HasPrefix(got[len(got)-1], "session: sess-") || slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "Fresh start") }) {
		t.Errorf("a sender not on the allowlist reset the session: %q", got)
	}
}

// A reply carries what it quotes into the prompt: given as text, or
// named by id, the chat's own record of that message.
func TestQuotedReplyInPrompt(t *testing.T) {
	in := e2e.New(t, e2e.Options{})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.PostReply("local:main", "Owner", "prompt", "Bob", "dinner at 7?")
	in.WaitFor("local:main", func(s string) bool {
		return strings.Contains(s, `<quote sender="Bob">dinner at 7?</quote>prompt</message>`)
	})
	first := in.Post("local:main", "Ann", "echo lunch at 1?")
	in.WaitFor("local:main", e2e.Equals("echo: lunch at 1?"))
	if _, err := in.Local.Post(context.Background(), local.Message{ChatJID: "local:main", Sender: "owner@local", SenderName: "Owner",
		Text: "prompt", QuotedID: first}); err != nil {
		t.Fatal(err)
	}
	in.WaitFor("local:main", func(s string) bool {
		return strings.Contains(s, `<quote id="`+first+`" sender="Ann">echo lunch at 1?</quote>prompt</message>`)
	})
}

// A reset while an agent runs holds: "/new" asks the running agent (which
// holds the old conversation) to finish and hands it nothing more, and
// neither "/new" nor `groups reset-session` is undone when that agent ends
// and reports its old session.
func TestSessionResetDuringARun(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "idleTimeout": "2s", "warm": 0`})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	isSession := func(s string) bool { return strings.HasPrefix(s, "session: ") }

	// "/new" while the agent of the old session runs.
	in.Post("local:main", "Owner", "echo one")
	in.WaitNext("local:main", e2e.Equals("echo: one"))
	in.Post("local:main", "Owner", "followup")
	in.WaitNext("local:main", e2e.Equals("ready"))
	in.Post("local:main", "Owner", "/new")
	in.WaitNext("local:main", func(s string) bool { return strings.HasPrefix(s, "Fresh start") })
	in.Post("local:main", "Owner", "session")
	if got := in.WaitNext("local:main", func(s string) bool { return isSession(s) || strings.HasPrefix(s, "followup: ") }).Text; got != "session: none" {
		t.Errorf("after /new the next message got %q, want a fresh run's \"session: none\"", got)
	}
	for _, s := range e2e.InChat(in.AllSent(), "local:main") {
		if strings.HasPrefix(s, "followup: ") {
			t.Errorf("a message after /new went to the old conversation: %q", s)
		}
	}

	// reset-session while the agent of the old session runs; it ends
	// (idle) and reports that session.
	in.Post("local:main", "Owner", "echo two")
	in.WaitNext("local:main", e2e.Equals("echo: two"))
	in.Post("local:main", "Owner", "followup")
	in.WaitNext("local:main", e2e.Equals("ready"))
	in.CLI("groups", "reset-session", "main")
	in.WaitNext("local:main", e2e.Equals("closed"))
	e2e.WaitNoProcs(t, e2e.Testagent(t), "stand-in agents")
	in.Post("local:main", "Owner", "session")
	if got := in.WaitNext("local:main", isSession).Text; got != "session: none" {
		t.Errorf("the run going during reset-session saved its old session back: next run got %q", got)
	}
}

// With agent.timeout equal to agent.idleTimeout (both 30m by default), an
// agent that answered and went quiet is ended by the idle _close, cleanly
// (it says goodbye and exits), not by SIGTERM from the hard timeout that
// its last answer restarted at the same moment.
func TestIdleCloseIsCleanWithEqualTimeouts(t *testing.T) {
	in := e2e.New(t, e2e.Options{Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "timeout": "2s", "idleTimeout": "2s", "warm": 0`})
	in.AddGroup("local:main", "main", "--main")
	in.Start()
	in.Post("local:main", "Owner", "followup")
	in.WaitNext("local:main", e2e.Equals("ready"))
	in.WaitNext("local:main", e2e.Equals("closed"))
	e2e.WaitNoProcs(t, e2e.Testagent(t), "stand-in agents")
	logs, _ := filepath.Glob(filepath.Join(in.Dir, "groups", "main", "logs", "agent-*.log"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), "SIGTERM") {
			t.Errorf("the quiet agent was terminated, not closed (%s):\n%s", l, b)
		}
	}
}
