package e2e_test

import (
	"context"
	"encoding/json"
	"net/url"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/e2e"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// /metrics as Prometheus reads it while the daemon works and retention
// prunes. Every scrape passes promlint. The start-latency histogram has
// one observation per message an agent took, labelled cold, standby or
// follow_up. No counter goes down between scrapes of one daemon; and the
// nanoclawd_*_total counters, which count what the database recorded, do
// not go down across the restart whose pruning at start deletes every row
// they were counted from.
func TestMetricsCountUpAcrossPruning(t *testing.T) {
	mock := mockapi.New(t)
	mock.SetUsage(mockUsage)
	in := e2e.New(t, e2e.Options{
		Agent: `"command": [` + e2e.Quote(e2e.Testagent(t)) + `], "timeout": "60s", "idleTimeout": "60s",
			"env": ["ANTHROPIC_API_KEY"], "warm": 1`,
		Top: `"console": {"listen": "127.0.0.1:0", "metricsToken": "m-token"},
			"retention": {"messages": "1d", "usage": "1d", "audit": "1d", "runs": "1d"}, ` + priceConfig,
		Env:        []string{"ANTHROPIC_API_KEY=sk-ant-test-" + randHex(t), "ANTHROPIC_BASE_URL=" + mock.URL},
		StopSignal: syscall.SIGTERM,
		Deadline:   time.Now().Add(5 * time.Minute)})
	in.AddGroup("local:main", "main", "--main")
	in.AddGroup("local:work", "work", "--no-trigger")
	p := in.Start()
	scrape := scraper(t, in)
	first := scrape()
	if got := startCounts(first); got["cold"]+got["standby"]+got["follow_up"] != 0 || len(got) != 3 {
		t.Errorf("an idle daemon's start latencies: %v, want each of cold, standby, follow_up at 0", got)
	}

	// An agent started for the message; then two taken by the agent work
	// got started ahead; then one handed to the agent still answering;
	// then main's, which has no agent started ahead.
	in.Post("local:work", "Bob", "api 1")
	in.WaitFor("local:work", func(s string) bool { return strings.HasPrefix(s, "api 1 ok") })
	waitStandby(t, in, "work")
	in.Post("local:work", "Bob", "violation network evil.example.com")
	in.WaitFor("local:work", e2e.Equals("violation reported"))
	waitStandby(t, in, "work")
	in.Post("local:work", "Bob", "converse")
	in.WaitFor("local:work", func(s string) bool { return strings.Contains(s, "converse</message>") })
	in.Post("local:work", "Bob", "echo four")
	in.WaitFor("local:work", func(s string) bool { return strings.HasPrefix(s, "followup: ") && strings.Contains(s, "echo four") })
	in.Post("local:main", "Owner", "ipc hello")
	in.WaitFor("local:main", e2e.Equals("queued hello"))
	in.WaitFor("local:main", e2e.Equals("ipc hello"))

	var before map[string]float64
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		before = values(scrape())
		// The outbox marks a message sent a moment after the channel took it.
		if before[`nanoclawd_messages_sent_total{channel="local"}`] >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the six messages seen sent are not counted: %v", before)
		}
	}
	noDecrease(t, "while the daemon worked", values(first), before, "")
	want := map[string]float64{
		`nanoclawd_inbound_to_agent_start_seconds_count{start="cold"}`:      2,
		`nanoclawd_inbound_to_agent_start_seconds_count{start="standby"}`:   2,
		`nanoclawd_inbound_to_agent_start_seconds_count{start="follow_up"}`: 1,
		`nanoclawd_messages_received_total{channel="local"}`:                5,
		`nanoclawd_ipc_files_total{verdict="handled"}`:                      1,
		`nanoclawd_violations_total{kind="network"}`:                        1,
	}
	for k, v := range want {
		if before[k] != v {
			t.Errorf("%s = %g, want %g", k, before[k], v)
		}
	}
	var spent float64
	for k, v := range before {
		if strings.HasPrefix(k, "nanoclawd_model_cost_usd_total{") && strings.Contains(k, `group="work"`) && strings.Contains(k, `provider="anthropic"`) {
			spent += v
		}
	}
	if spent < requestCost*0.999 || spent > requestCost*1.001 {
		t.Errorf("work's cost with provider anthropic: %g, want %g (its one request's)", spent, requestCost)
	}

	// Every row those counts came from is made old, and the next start's
	// pruning deletes it; the outbox forgets its sent messages too.
	p.Stop()
	db, err := store.OpenFile(in.Layout().DB())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	old := time.Now().Add(-10 * 24 * time.Hour)
	for _, q := range []string{`UPDATE messages SET time = ?1 / 1000000`, `UPDATE usage_requests SET at = ?1 / 1000000`,
		`UPDATE violations SET time = ?1`, `UPDATE outbox SET sent_at = ?1 WHERE sent_at IS NOT NULL`} {
		if _, err := db.ExecContext(ctx, q, old.UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	p = in.Start()
	scrape = scraper(t, in) // the console has a new port
	last := values(scrape())
	noDecrease(t, "across the restart", counters(before), last, "nanoclawd_")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var left int
		db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM messages) + (SELECT count(*) FROM usage_requests) +
			(SELECT count(*) FROM violations WHERE logged = 1) + (SELECT count(*) FROM outbox WHERE sent_at IS NOT NULL)`).Scan(&left)
		now := values(scrape())
		noDecrease(t, "while retention pruned", last, now, "")
		last = now
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d old rows are left after the pruning at start", left)
		}
	}
	noDecrease(t, "after pruning, against the first daemon", counters(before), last, "nanoclawd_")
	if n := startCounts(scrape()); n["cold"]+n["standby"]+n["follow_up"] != 0 {
		t.Errorf("the new daemon has start latencies before any message: %v", n)
	}

	in.Post("local:work", "Bob", "echo after")
	in.WaitFor("local:work", e2e.Equals("echo: after"))
	after := scrape()
	noDecrease(t, "after the next message", last, values(after), "")
	if n := startCounts(after); n["cold"]+n["standby"]+n["follow_up"] != 1 {
		t.Errorf("start latencies after one message: %v, want one", n)
	}
	if v := values(after)[`nanoclawd_messages_received_total{channel="local"}`]; v != 6 {
		t.Errorf("messages received after pruning every one of them and one more: %g, want 6", v)
	}
}

// scraper returns a scrape of in's /metrics that fails t unless it is
// Prometheus text that passes promlint.
func scraper(t *testing.T, in *e2e.Install) func() map[string]*dto.MetricFamily {
	u, err := url.Parse(strings.TrimSpace(in.CLI("console", "--url")))
	if err != nil {
		t.Fatal(err)
	}
	return func() map[string]*dto.MetricFamily {
		t.Helper()
		// The login URL's host is the console's name under .localhost,
		// which Go does not resolve; Prometheus scrapes the address.
		fams := e2e.Metrics(t, u.Scheme+"://127.0.0.1:"+u.Port(), "m-token")
		if f := fams["nanoclawd_scrape_error"]; f == nil || f.Metric[0].GetGauge().GetValue() != 0 {
			t.Errorf("the scrape could not read the daemon's state: %v", f)
		}
		return fams
	}
}

// values is every counter of fams, and every histogram's count, sum and
// buckets, by name and labels as the text format writes them.
func values(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			labels := func(extra ...string) string {
				var l []string
				for _, p := range m.Label {
					l = append(l, p.GetName()+`="`+p.GetValue()+`"`)
				}
				l = append(l, extra...)
				sort.Strings(l)
				if len(l) == 0 {
					return ""
				}
				return "{" + strings.Join(l, ",") + "}"
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[name+labels()] = m.GetCounter().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				out[name+"_count"+labels()] = float64(h.GetSampleCount())
				out[name+"_sum"+labels()] = h.GetSampleSum()
				for _, b := range h.Bucket {
					le, _ := json.Marshal(b.GetUpperBound())
					out[name+"_bucket"+labels(`le="`+string(le)+`"`)] = float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return out
}

// counters is the counters of values (a histogram's count, sum and
// buckets are not: they are the daemon's since it started).
func counters(values map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range values {
		if name, _, _ := strings.Cut(k, "{"); strings.HasSuffix(name, "_total") {
			out[k] = v
		}
	}
	return out
}

// noDecrease fails t for each value of before (whose name starts with
// prefix) that is missing from after or lower there.
func noDecrease(t *testing.T, when string, before, after map[string]float64, prefix string) {
	t.Helper()
	for k, v := range before {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if w, ok := after[k]; !ok {
			t.Errorf("%s: %s (%g) is gone", when, k, v)
		} else if w < v {
			t.Errorf("%s: %s went down from %g to %g", when, k, v, w)
		}
	}
}

// startCounts is the start-latency histogram's count by its label.
func startCounts(fams map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	if f := fams["nanoclawd_inbound_to_agent_start_seconds"]; f != nil {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				out[l.GetValue()] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// waitStandby waits until folder has an agent started ahead.
func waitStandby(t *testing.T, in *e2e.Install, folder string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var st struct {
			Groups []struct{ Folder, Agent string }
		}
		if err := json.Unmarshal([]byte(in.CLI("status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		for _, g := range st.Groups {
			if g.Folder == folder && g.Agent == "standby" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no agent started ahead", folder)
		}
	}
}
