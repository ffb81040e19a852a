package alerts

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/channel"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
)

const killChildEnv = "ALERTS_KILL_CHILD_DIR"

// TestKill9BetweenRaiseAndSend re-runs this test binary as a child that
// raises alerts (and queues replies) while its channel hangs mid-send, and
// kills it with SIGKILL. The parent reopens the database: every message is
// then sent exactly once, the folded repeats come out as one summary with
// the right count, and the audit log holds every violation.
func TestKill9BetweenRaiseAndSend(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(t, dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9BetweenRaiseAndSend$", "-test.count=1", "-test.timeout=1m")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	raised := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "raised" {
				raised <- true
				return
			}
		}
		raised <- false
	}()
	select {
	case ok := <-raised:
		if !ok {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("child ended without raising its alerts")
		}
	case <-time.After(deadline):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("child did not raise its alerts in time")
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	cmd.Wait()

	// The restarted daemon: its clock is past the child's cooldown windows.
	later := func() time.Time { return time.Now().Add(2 * time.Minute) }
	e := newEnv(t, dir, time.Minute, later, true)
	const want = DefaultMaxPerGroup + 1 + 3 // the alerts a group may raise, the summary of the rest, the replies
	ids := map[string]bool{}
	violations, replies := 0, 0
	for range want {
		m := e.rec.Next(t)
		if ids[m.ID] {
			t.Fatalf("message %s sent twice", m.ID)
		}
		ids[m.ID] = true
		if m.ChatJID == "a@g.us" {
			if exp := fmt.Sprintf("reply %d", replies); m.Text != exp {
				t.Errorf("reply %q out of order, want %q", m.Text, exp)
			}
			replies++
			continue
		}
		if m.ChatJID != mainJID {
			t.Errorf("alert to %q", m.ChatJID)
		}
		violations += counted(t, m.Text)
	}
	if violations != 25 {
		t.Errorf("alerts account for %d violations, want 25", violations)
	}
	if err := e.out.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != want {
		t.Errorf("%d messages queued in all, want %d", n, want)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE sent_at IS NULL`); n != 0 {
		t.Errorf("%d messages unsent", n)
	}
	if sent := e.rec.Sent(); len(sent) != want {
		t.Errorf("%d sends accepted, want %d", len(sent), want)
	}
	if lines := readLines(t, filepath.Join(e.groupsDir, "family", "logs", "security.jsonl")); len(lines) != 25 {
		t.Errorf("%d audit lines, want 25", len(lines))
	}
}

// killChild raises 25 violations (5 targets, 20 repeats of the first,
// folded) and queues 3 replies, with a channel that hangs in Send, prints
// "raised" once a send is under way, and waits to be killed.
func killChild(t *testing.T, dir string) {
	frozen := time.Now()
	e := newEnv(t, dir, time.Minute, func() time.Time { return frozen }, false)
	sending := make(chan struct{}, 1)
	e.rec.Refuse(func(channel.Outgoing) error {
		select {
		case sending <- struct{}{}:
		default:
		}
		select {} // the channel hangs: the message is never accepted
	})
	e.start(t)
	ctx := context.Background()
	for i := range 5 {
		if err := e.rep.Report(ctx, netViolation("family", fmt.Sprintf("t%d.example", i))); err != nil {
			t.Fatal(err)
		}
	}
	for range 20 {
		if err := e.rep.Report(ctx, netViolation("family", "t0.example")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := e.out.Enqueue(ctx, "a@g.us", fmt.Sprintf("reply %d", i), outbox.KindReply); err != nil {
			t.Fatal(err)
		}
	}
	<-sending
	fmt.Println("raised")
	select {}
}
