package e2e_test

import (
	"strings"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/selftest"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// The daemon proves the sandbox at start; when a boundary does not hold
// (here: the test's own run may read the owner's home) confined groups get
// no agent, the group is told plainly, the main chat once with the detail,
// and the main group, which is not confined, still works.
func TestBrokenSandboxFailsClosed(t *testing.T) {
	in := e2e.New(t, e2e.Options{Home: t.TempDir(), Env: []string{selftest.WeakenEnv + "=home"}})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:family", "family", "--no-trigger")
	in.Start()

	in.Post("local:family", "Eve", "echo hello")
	all := in.WaitFor("local:family", func(s string) bool { return strings.Contains(s, "could not answer") })
	got := strings.Join(e2e.InChat(all, "local:family"), "\n")
	if strings.Contains(got, "echo: hello") || !strings.Contains(got, "the sandbox does not hold on this machine") || strings.Contains(got, "selftest") {
		t.Errorf("the confined group: %q", got)
	}
	in.Post("local:main", "Owner", "echo still here")
	all = in.WaitFor("local:main", e2e.Equals("echo: still here"))
	var alerts []string
	for _, s := range e2e.InChat(all, "local:main") {
		if strings.Contains(s, "does not hold") {
			alerts = append(alerts, s)
		}
	}
	if len(alerts) != 1 || !strings.HasPrefix(alerts[0], "[SANDBOX ALERT]") || !strings.Contains(alerts[0], "home (read ") {
		t.Errorf("the main chat was told %d time(s): %q", len(alerts), alerts)
	}
	// A second refused run tells the group again, the owner not again.
	in.Post("local:family", "Eve", "echo again")
	refusals := 0
	in.WaitFor("local:family", func(s string) bool {
		if strings.Contains(s, "the sandbox does not hold") {
			refusals++
		}
		return refusals == 2
	})
	n := 0
	for _, s := range e2e.InChat(in.AllSent(), "local:main") {
		if strings.Contains(s, "does not hold") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the main chat was told %d times", n)
	}
}
