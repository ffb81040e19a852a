package e2e_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/alerts"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
)

// End-to-end proof of contract §7 with the real daemon: a violation frame
// of a sandboxed agent is audited, alerted in the main chat at once and
// explained to its group; floods fold into summaries whose counts add up,
// across a kill -9 too.

func TestAlertViolationEndToEnd(t *testing.T) {
	h := newIPCInstall(t, "0s")
	h.threeGroups()
	h.Start()

	h.Post("local:family", "Alice", "@Andy violation network evil.example")
	all := h.WaitFor("local:main", func(s string) bool { return strings.Contains(s, "evil.example") })
	alert := all[len(all)-1].Text
	// The frame says "blocked"; it is only the agent's word, and the alert
	// says so.
	for _, want := range []string{"the agent reports", `group "family"`, "Bash", "evil.example", "network.allowedDomains"} {
		if !strings.HasPrefix(alert, "[SANDBOX ALERT]") || !strings.Contains(alert, want) {
			t.Errorf("alert lacks [SANDBOX ALERT] or %q:\n%s", want, alert)
		}
	}
	e := h.waitAudit("family", func(e auditEntry) bool { return e.Target == "evil.example" })
	if e != (auditEntry{Time: e.Time, Group: "family", Kind: "network", Tool: "Bash", Target: "evil.example", Detail: "testagent", Action: "reported"}) {
		t.Errorf("security.jsonl line %+v", e)
	}
	if v := h.violations("family"); len(v) != 1 || v[0] != e {
		t.Errorf("violations --group family --json = %+v, want the audit line %+v", v, e)
	}

	// The agent answered the group, so the group needs no notice. A notice
	// is queued when the run ends, before the next run's answer.
	h.Post("local:family", "Alice", "@Andy echo next")
	all = h.WaitFor("local:family", e2e.Equals("echo: next"))
	if got := e2e.InChat(all, "local:family"); len(got) != 2 || got[0] != "violation reported" {
		t.Errorf("family chat after a run that answered: %q", got)
	}

	// A run that is blocked and says nothing: the group is told why.
	h.Post("local:family", "Alice", "@Andy quiet-violation")
	h.WaitFor("local:main", func(s string) bool {
		return strings.HasPrefix(s, "[SANDBOX ALERT]") && strings.Contains(s, "quiet.example")
	})
	h.WaitFor("local:family", e2e.Equals(alerts.GroupNotice("Andy")))

	// The main group's own violations are audited, not alerted: an alert
	// would be queued for the main chat before the run's answer.
	h.Post("local:main", "Owner", "violation network main.example")
	all = h.WaitFor("local:main", e2e.Equals("violation reported"))
	for _, s := range e2e.InChat(all, "local:main") {
		if strings.Contains(s, "main.example") {
			t.Errorf("main's own violation alerted: %q", s)
		}
	}
	h.waitAudit("main", func(e auditEntry) bool { return e.Target == "main.example" && e.Kind == "network" })
	if v := h.violations("main"); len(v) != 1 || v[0].Target != "main.example" {
		t.Errorf("violations --group main --json = %+v", v)
	}
	if v := h.violations("family"); len(v) != 2 {
		t.Errorf("violations --group family --json = %+v, want evil.example and quiet.example", v)
	}
	// The group was told nothing else: main gets no notice either.
	for _, s := range e2e.InChat(h.AllSent(), "local:main") {
		if s == alerts.GroupNotice("Andy") {
			t.Error("the main group got the sandbox notice")
		}
	}
}

var moreRE = regexp.MustCompile(`^\[SANDBOX ALERT\] \+(\d+) more`)

// floodAlerts returns the main chat's alerts about target and the number
// of violations they account for: 1 for a first alert, N for "+N more".
func (h *ipcInstall) floodAlerts(target string) (msgs []e2e.Sent, total int) {
	h.TB.Helper()
	for _, m := range h.AllSent() {
		if m.ChatJID != "local:main" || !strings.Contains(m.Text, target) {
			continue
		}
		if !strings.HasPrefix(m.Text, "[SANDBOX ALERT]") || !strings.Contains(m.Text, `group "family"`) {
			h.TB.Errorf("alert about %s does not start with [SANDBOX ALERT] and name family: %q", target, m.Text)
		}
		msgs = append(msgs, m)
		if sm := moreRE.FindStringSubmatch(m.Text); sm != nil {
			n, _ := strconv.Atoi(sm[1])
			total += n
		} else {
			total++
		}
	}
	return msgs, total
}

// waitFlood waits until the alerts about target account for at least want
// violations, and returns them with their total.
func (h *ipcInstall) waitFlood(target string, want int) ([]e2e.Sent, int) {
	h.TB.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msgs, total := h.floodAlerts(target)
		if total >= want {
			return msgs, total
		}
		if time.Now().After(deadline) {
			h.TB.Fatalf("alerts account for %d of %d violations: %+v", total, want, msgs)
		}
		h.SentAfter(lastSeq(h.AllSent()), time.Second)
	}
}

// checkFlood checks the folded alerts of a 1,000-violation flood: they add
// up to exactly 1,000, and one more violation afterwards makes 1,001 (a
// summary sent twice would have come out before it). It also checks the
// audit trail holds each violation once.
func (h *ipcInstall) checkFlood(cooldown time.Duration) {
	h.TB.Helper()
	msgs, total := h.waitFlood("flood.example", 1000)
	if total != 1000 {
		h.TB.Errorf("alerts add up to %d, want 1000: %+v", total, msgs)
	}
	// Folding: at most one message per cooldown window the flood spanned,
	// plus the first alert and the last summary. The windows are the
	// daemon's and the times are when the outbox sent, a little later and
	// not evenly so: a span a hair under two windows may hold the
	// summaries of two (3.9996 s with a cooldown of 2 s sent four), so a
	// started window counts whole.
	span := msgs[len(msgs)-1].At(h.TB).Sub(msgs[0].At(h.TB))
	if limit := 2 + int((span+cooldown-1)/cooldown); len(msgs) > limit {
		h.TB.Errorf("%d alert messages over %v with cooldown %v; want at most %d", len(msgs), span, cooldown, limit)
	}
	h.TB.Logf("1000 violations → %d messages over %v: %q", len(msgs), span, firstLines(msgs))
	n := 0
	for _, e := range h.auditLines("family") {
		if e.Target == "flood.example" {
			n++
		}
	}
	if n != 1000 {
		h.TB.Errorf("security.jsonl holds %d flood lines, want 1000", n)
	}
	if v := h.violations("family"); len(v) != 1000 {
		h.TB.Errorf("`nanoclawd violations --group family` lists %d, want 1000", len(v))
	}

	h.Post("local:family", "Alice", "@Andy violation network flood.example")
	msgs, total = h.waitFlood("flood.example", 1001)
	if total != 1001 {
		h.TB.Errorf("after one more violation the alerts add up to %d, want 1001: %+v", total, msgs)
	}
}

func firstLines(msgs []e2e.Sent) []string {
	var out []string
	for _, m := range msgs {
		line, _, _ := strings.Cut(m.Text, "\n")
		out = append(out, line)
	}
	return out
}

func TestAlertFloodFolded(t *testing.T) {
	h := newIPCInstall(t, "2s")
	h.threeGroups()
	h.Start()
	h.Post("local:family", "Alice", "@Andy flood-violations")
	h.WaitFor("local:family", e2e.Equals("flood done"))
	h.checkFlood(2 * time.Second)
}

// TestAlertFloodKill9 kills the daemon right after the flood, while the
// repeats wait in their cooldown window for the summary; the restarted
// daemon sends it, and the counts still add up to exactly 1,000.
func TestAlertFloodKill9(t *testing.T) {
	h := newIPCInstall(t, "4s")
	h.threeGroups()
	p := h.Start()
	h.Post("local:family", "Alice", "@Andy flood-violations")
	// The answer is queued after every violation of the run was recorded.
	h.WaitFor("local:family", e2e.Equals("flood done"))
	_, before := h.floodAlerts("flood.example")
	p.Kill9()
	t.Logf("killed with alerts for %d of 1000 violations sent", before)
	h.Start()
	h.checkFlood(4 * time.Second)
}

// One run printing 100 distinct fake denials, and one carrying an
// attacker's instruction: the main group gets at most alerts.maxPerGroup
// alerts and one summary, their counts add up, and the attacker's text
// arrives quoted, capped, marked unverified and without a hint built from it.
func TestAlertFloodOfDistinctFakes(t *testing.T) {
	h := newIPCInstall(t, "2s")
	h.threeGroups()
	h.Start()
	h.Post("local:family", "Alice", "@Andy violations 99")
	h.WaitFor("local:family", e2e.Equals("violations reported"))
	var msgs []string
	total := 0
	for deadline := time.Now().Add(30 * time.Second); total < 100; {
		msgs, total = nil, 0
		for _, m := range h.AllSent() {
			if m.ChatJID == "local:main" && strings.HasPrefix(m.Text, "[SANDBOX ALERT]") {
				msgs = append(msgs, m.Text)
				if sm := moreRE.FindStringSubmatch(m.Text); sm != nil {
					n, _ := strconv.Atoi(sm[1])
					total += n
				} else {
					total++
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("alerts account for %d of 100 violations: %q", total, msgs)
		}
		h.SentAfter(lastSeq(h.AllSent()), time.Second)
	}
	if total != 100 || len(msgs) > alerts.DefaultMaxPerGroup+1 {
		t.Errorf("100 violations → %d messages counting %d, want at most %d counting 100:\n%s",
			len(msgs), total, alerts.DefaultMaxPerGroup+1, strings.Join(msgs, "\n---\n"))
	}
	all := strings.Join(msgs, "\n")
	if strings.Contains(all, `["wa.me"]`) || strings.Contains(all, "allowedDomains\":[\"wa") {
		t.Errorf("a hint was built from the attacker's target:\n%s", all)
	}
	for _, m := range msgs {
		if len(m) > 3000 {
			t.Errorf("an alert of %d bytes: the agent's text is not capped", len(m))
		}
		if strings.Contains(m, "6-digit") && !strings.Contains(m, "“") {
			t.Errorf("the attacker's text is not quoted:\n%s", m)
		}
	}
	if v := h.violations("family"); len(v) != 100 || v[0].Action != "reported" {
		t.Errorf("audit: %d rows, first %+v; want 100 marked reported", len(v), v[0])
	}
}
