package e2e_test

import (
	"strings"
	"syscall"
	"testing"

	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m) }

// The harness itself: WaitNext moves on past what it returned, a stop by
// signal is graceful, and a restart waits for its own "running" line.
func TestHarness(t *testing.T) {
	in := e2e.New(t, e2e.Options{StopSignal: syscall.SIGTERM})
	in.AddGroup("local:main", "main", "--main")
	p := in.Start()
	if p.Ready <= 0 {
		t.Errorf("Ready = %v", p.Ready)
	}
	// One at a time: two messages posted together may be answered by one
	// run (the daemon coalesces), which is not what this tests.
	isEcho := func(s string) bool { return strings.HasPrefix(s, "echo: ") }
	in.Post("local:main", "Owner", "echo one")
	if m := in.WaitNext("local:main", isEcho); m.Text != "echo: one" {
		t.Errorf("first WaitNext = %q", m.Text)
	}
	in.Post("local:main", "Owner", "echo two")
	if m := in.WaitNext("local:main", isEcho); m.Text != "echo: two" {
		t.Errorf("second WaitNext = %q", m.Text)
	}
	p.Stop()
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d after SIGTERM", code)
	}
	in.Start()
	in.Post("local:main", "Owner", "echo three")
	all := in.WaitFor("local:main", e2e.Equals("echo: three"))
	if got := strings.Join(e2e.InChat(in.AllSent(), "local:main"), "|"); got != "echo: one|echo: two|echo: three" || len(all) != 3 {
		t.Errorf("sent %q; WaitFor returned %d", got, len(all))
	}
}
