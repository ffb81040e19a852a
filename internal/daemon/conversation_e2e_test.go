package daemon_test

import (
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
