package alerts

// Flood control: folding, summaries and their counts.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/security"
)

func counted(t testing.TB, text string) int {
	if m := moreRE.FindStringSubmatch(text); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	if !strings.HasPrefix(text, "[SANDBOX ALERT] ") {
		t.Fatalf("not an alert: %q", text)
	}
	return 1
}

func TestThousandRepeatsFoldIntoSummary(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	e := newEnv(t, "", time.Minute, clock.Now, true)
	ctx := context.Background()
	for i := range 1000 {
		if err := e.rep.Report(ctx, netViolation("family", "evil.example")); err != nil {
			t.Fatal(i, err)
		}
	}
	first := e.rec.Next(t)
	if n := counted(t, first.Text); n != 1 {
		t.Fatalf("first message counts %d: %s", n, first.Text)
	}
	clock.Add(time.Minute)
	e.rep.poke()
	sum := e.rec.Next(t)
	if n := counted(t, sum.Text); n != 999 {
		t.Fatalf("summary counts %d, want 999: %s", n, sum.Text)
	}
	if !strings.Contains(sum.Text, "family") || !strings.Contains(sum.Text, "evil.example") {
		t.Errorf("summary does not name group and target: %s", sum.Text)
	}
	// The window with no repeats ends quietly.
	clock.Add(time.Minute)
	e.rep.poke()
	if err := e.out.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox`); n != 2 {
		t.Errorf("%d messages for 1000 repeats, want 2", n)
	}
	if n := e.count(t, `SELECT count(*) FROM violations`); n != 1000 {
		t.Errorf("%d audit rows, want 1000", n)
	}
}

// A flood under a real clock and a short cooldown: the summaries come from
// Run's timer, and the counts still add up.
func TestFloodCountsAddUp(t *testing.T) {
	const total = 400
	e := newEnv(t, "", 50*time.Millisecond, nil, false)
	e.rep.capSpan = 100 * time.Millisecond // the cap's minute, shortened like the cooldown
	e.start(t)
	ctx := context.Background()
	for i := range total {
		if err := e.rep.Report(ctx, netViolation("family", "evil.example")); err != nil {
			t.Fatal(i, err)
		}
	}
	sum, msgs := 0, 0
	for sum < total {
		sum += counted(t, e.rec.Next(t).Text)
		msgs++
	}
	if sum != total {
		t.Errorf("messages count %d violations, want %d", sum, total)
	}
	t.Logf("%d violations → %d messages", total, msgs)
}

// A flood of distinct violations from one group, the way an agent printing
// fake denials makes them: at most MaxPerGroup alerts and one summary,
// counts adding up, every kind and tool named in the summary (nothing
// hides behind another's name), and nothing of the attacker's text turned
// into a hint.
func TestFloodOfDistinctViolationsPerGroup(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}
	e := newEnv(t, "", time.Minute, clock.Now, true)
	ctx := context.Background()
	var vs []security.Violation
	for i := range 96 {
		vs = append(vs, security.Violation{Group: "family", Kind: security.KindFilesystem, Tool: "Bash", Target: fmt.Sprintf("/fake/%d", i),
			Detail: "Read-only file system", Action: "reported"})
	}
	vs = append(vs,
		security.Violation{Group: "family", Kind: security.KindTool, Tool: "TodoWrite", Target: ""},
		security.Violation{Group: "family", Kind: security.KindTool, Tool: "TodoWrite", Target: ""},
		security.Violation{Group: "family", Kind: security.KindIPC, Tool: "register_group", Target: ""},
		security.Violation{Group: "family", Kind: security.KindNetwork, Tool: "Bash", Target: "wa.me", Detail: "reply to this bot with your 6-digit WhatsApp code"},
	)
	for _, v := range vs {
		if err := e.rep.Report(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(time.Minute)
	e.rep.poke()
	var msgs []string
	sum := 0
	for sum < len(vs) {
		m := e.rec.Next(t)
		msgs = append(msgs, m.Text)
		sum += counted(t, m.Text)
	}
	if sum != len(vs) || len(msgs) > DefaultMaxPerGroup+1 {
		t.Fatalf("%d violations → %d messages counting %d, want at most %d:\n%s", len(vs), len(msgs), sum, DefaultMaxPerGroup+1, strings.Join(msgs, "\n---\n"))
	}
	summary := msgs[len(msgs)-1]
	t.Logf("first alert:\n%s\nsummary:\n%s", msgs[0], summary)
	for _, want := range []string{"tool by TodoWrite ×2", "ipc by register_group ×1", "network by Bash ×1", "filesystem by Bash ×93", "and 90 more"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	for _, m := range msgs {
		if strings.Contains(m, `"allowedDomains":["wa.me"]`) {
			t.Errorf("a hint was built from the attacker's target:\n%s", m)
		}
	}
}
