package console

import (
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/nanoclawd/nanoclawd/internal/status"
)

func TestMoneyShowsCents(t *testing.T) {
	for _, c := range []struct {
		usd  float64
		want string
	}{{0, "$0.00"}, {0.0042, "0.42¢"}, {0.0005, "0.05¢"}, {0.00000001, "<0.01¢"}, {0.02, "$0.02"}, {12.345, "$12.35"}} {
		if got := money(c.usd); got != c.want {
			t.Errorf("money(%g) = %q, want %q", c.usd, got, c.want)
		}
	}
}

// An axis ends at a round value above the largest bar, and a spend axis
// under a dollar reads in cents: never "$0.00" at both ends.
func TestAxisReadsRealValues(t *testing.T) {
	for _, c := range []struct {
		max       float64
		top, half string
	}{{0.0042, "0.5¢", "0.25¢"}, {0.02, "2¢", "1¢"}, {0.7, "$1.00", "$0.50"}, {3.2, "$5.00", "$2.50"}, {0, "$1.00", "$0.50"}} {
		top := niceTop(c.max)
		label := moneyAxis(top)
		if got, half := label(top), label(top/2); got != c.top || half != c.half {
			t.Errorf("spend up to %g: axis %q, %q; want %q, %q", c.max, got, half, c.top, c.half)
		}
	}
	if got := countAxis(0)(niceTop(1234)); got != "2k" {
		t.Errorf("tokens up to 1234: top %q, want 2k", got)
	}
}

// An audit record reads as a sentence; the gateway's "network" tool does
// not make "network network example.com".
func TestViolationsReadAsSentences(t *testing.T) {
	for _, c := range []struct {
		v    security.Violation
		want string
	}{
		{security.Violation{Group: "work", Kind: security.KindNetwork, Tool: "network", Target: "example.com", Action: "blocked"},
			"work: a command was kept from reaching example.com"},
		{security.Violation{Group: "work", Kind: security.KindNetwork, Tool: "Bash", Target: "evil.example.com", Action: "reported"},
			"work: Bash was kept from reaching evil.example.com, the agent reports (nanoclawd did not see it)"},
		{security.Violation{Group: "work", Kind: security.KindFilesystem, Tool: "Read", Target: "/root/.ssh/id_rsa", Action: "blocked"},
			"work: Read was kept from /root/.ssh/id_rsa"},
		{security.Violation{Group: "work", Kind: security.KindLimit, Tool: "runner", Target: "memory", Action: "blocked"},
			"work: its run went over the memory limit and was stopped"},
		{security.Violation{Group: "family", Kind: "group", Tool: "owner", Detail: "the owner (console) paused group family", Action: "paused-by-owner"},
			"the owner (console) paused group family"},
	} {
		got := sentence(c.v)
		if got != c.want {
			t.Errorf("sentence(%+v) = %q, want %q", c.v, got, c.want)
		}
		if strings.Contains(got, "network network") {
			t.Errorf("%q repeats itself", got)
		}
	}
}

// The live column keeps the newest 20, and a stream continues after the
// id its page showed.
func TestHubKeepsTheNewest(t *testing.T) {
	h := newHub()
	for i := range 25 {
		h.add(event{Kind: "state", Text: string(rune('a' + i))})
	}
	shown, after := h.page()
	if len(shown) != liveKeep || shown[0].Text != "y" || shown[liveKeep-1].Text != "f" {
		t.Fatalf("page shows %d, newest %q, oldest %q", len(shown), shown[0].Text, shown[len(shown)-1].Text)
	}
	if evs, _ := h.since(after); len(evs) != 0 {
		t.Errorf("after the page's last: %d events", len(evs))
	}
	_, changed := h.since(after)
	h.add(event{Kind: "state", Text: "z"})
	select {
	case <-changed:
	default:
		t.Fatal("a new event woke no stream")
	}
	if evs, _ := h.since(after); len(evs) != 1 || evs[0].Text != "z" {
		t.Errorf("after the page: %+v", evs)
	}
}

// The page templates are parsed on first use, not when the program starts:
// each parses, with its layout, and defines what render executes.
func TestPagesParse(t *testing.T) {
	for _, p := range []string{"overview", "group", "usage", "violations"} {
		if tp := pages()[p]; tp == nil || tp.Lookup("layout") == nil {
			t.Errorf("page %s: %v", p, tp)
		}
	}
}

// The group page says how the last run ended as `status` does: a run
// the daemon's stop ended is "stopped", not a failure.
func TestLastRunReadsAsStatusSays(t *testing.T) {
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		run       status.LastRun
		want, not string
	}{
		{status.LastRun{OK: true, Stopped: true}, ", stopped</p>", ", ok"}, // as the router records it
		{status.LastRun{OK: true}, ", ok</p>", "failed"},
		{status.LastRun{Error: "agent exited with status 3"}, ", failed: agent exited with status 3</p>", "stopped"},
	} {
		c.run.Started, c.run.Finished = at, at.Add(3*time.Second)
		var b strings.Builder
		if err := pages()["group"].ExecuteTemplate(&b, "content", groupData{State: "idle", LastRun: &c.run}); err != nil {
			t.Fatal(err)
		}
		if page := b.String(); !strings.Contains(page, "took 3s"+c.want) || strings.Contains(page, c.not) {
			t.Errorf("last run %+v reads:\n%s", c.run, page)
		}
	}
}
