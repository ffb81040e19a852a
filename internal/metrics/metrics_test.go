package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// source is a Source as a func field.
type source struct {
	snapshot func() (Snapshot, error)
}

func (s source) Snapshot(context.Context) (Snapshot, error) { return s.snapshot() }

func scrape(t testing.TB, m *Metrics, token, auth string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(m.Handler(func() string { return token }))
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// lint fails t for every problem promlint finds in a scrape's text.
func lint(t testing.TB, text string) {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// An idle daemon's scrape already has every series, at its baseline, and
// passes promlint.
func TestBaselineSeries(t *testing.T) {
	m := New(source{func() (Snapshot, error) {
		return Snapshot{MessagesIn: map[string]float64{"local": 0}, MessagesOut: map[string]float64{"local": 0}, Runs: map[string]float64{"ok": 0, "error": 0},
			IPC: map[string]float64{"handled": 0, "refused": 0}, Violations: map[string]float64{"network": 0},
			Usage: []Usage{{Group: "family"}}, Connected: map[string]bool{"local": true}, ModelAPI: map[string]bool{"credential": false}}, nil
	}})
	code, text := scrape(t, m, "tok", "Bearer tok")
	if code != 200 {
		t.Fatalf("%d %s", code, text)
	}
	lint(t, text)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`nanoclawd_runs_total{outcome="ok"} 0`, `nanoclawd_runs_total{outcome="error"} 0`,
		`nanoclawd_messages_received_total{channel="local"} 0`, `nanoclawd_model_cost_usd_total{group="family",model="",provider=""} 0`,
		`nanoclawd_channel_connected{channel="local"} 1`, `nanoclawd_scrape_error 0`, `nanoclawd_run_duration_seconds_count 0`,
		`nanoclawd_inbound_to_agent_start_seconds_count{start="cold"} 0`, `nanoclawd_inbound_to_agent_start_seconds_count{start="standby"} 0`,
		`nanoclawd_inbound_to_agent_start_seconds_count{start="follow_up"} 0`} {
		if !strings.Contains(text, want) {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
	if fams["go_goroutines"] == nil {
		t.Error("no Go runtime series")
	}

	m.RunDone(3 * time.Second)
	m.AgentStarted(StartStandby, time.Second)
	if _, text := scrape(t, m, "tok", "Bearer tok"); !strings.Contains(text, `nanoclawd_run_duration_seconds_count 1`) ||
		!strings.Contains(text, `nanoclawd_inbound_to_agent_start_seconds_count{start="standby"} 1`) ||
		!strings.Contains(text, `nanoclawd_inbound_to_agent_start_seconds_count{start="cold"} 0`) {
		t.Errorf("a run and a start were not counted:\n%s", text)
	}
}

func TestMetricsToken(t *testing.T) {
	m := New(source{func() (Snapshot, error) { return Snapshot{}, errors.New("db gone") }})
	if code, _ := scrape(t, m, "", "Bearer "); code != 404 {
		t.Errorf("no token configured: %d, want 404", code)
	}
	for _, auth := range []string{"", "Bearer wrong", "tok", "Basic tok"} {
		if code, _ := scrape(t, m, "tok", auth); code != 403 {
			t.Errorf("Authorization %q: %d, want 403", auth, code)
		}
	}
	if code, text := scrape(t, m, "tok", "Bearer tok"); code != 200 || !strings.Contains(text, "nanoclawd_scrape_error 1") {
		t.Errorf("a failed read of the state: %d\n%s", code, text)
	}
}
