// Package metrics is nanoclawd's Prometheus series, in a registry of its
// own: what the daemon already keeps (messages, the outbox, the audit
// trail, model usage, channels) is read at scrape time from a Source, so
// nothing else carries counters; only what exists nowhere else (how long
// runs take, how long a message waits for its agent) is observed by the
// router through RunDone and AgentStarted.
package metrics

import (
	"context"
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Snapshot is the daemon's state as the series show it. Every map holds
// each label value the daemon knows of (every enabled channel, every
// registered group, every violation kind), zero or not, so no series is
// missing while the daemon is idle.
type Snapshot struct {
	MessagesIn  map[string]float64 // channel → messages received and stored
	MessagesOut map[string]float64 // channel → messages sent
	IPC         map[string]float64 // "handled" | "refused" → IPC request files decided
	Violations  map[string]float64 // kind → audit-trail records
	Backlog     float64            // outbox messages waiting to be sent
	Standbys    float64            // agents started ahead, waiting
	Usage       []GroupModel
	Connected   map[string]bool // channel → connected
	// ModelAPI is the standing problems by kind ("credential", "rate").
	ModelAPI map[string]bool
}

// GroupModel is one group's model usage with one model ("" for a group
// that has made no request yet).
type GroupModel struct {
	Group, Model                               string
	Input, Output, CacheWrite, CacheRead, Cost float64
}

// Source reads a Snapshot at scrape time.
type Source interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// Metrics is the registry and the few series observed as they happen.
type Metrics struct {
	Registry     *prometheus.Registry
	runs         *prometheus.CounterVec
	runDuration  prometheus.Histogram
	startLatency prometheus.Histogram
}

// Outcomes of a run, the values of nanoclawd_runs_total's label.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// New is the registry over src, with Go and process series beside ours.
func New(src Source) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nanoclawd_runs_total",
			Help: "Agent runs that ended, by outcome."}, []string{"outcome"}),
		runDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nanoclawd_run_duration_seconds",
			Help: "How long agent runs took, from start to end.", Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800}}),
		startLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nanoclawd_inbound_to_agent_start_seconds",
			Help:    "From a message's arrival to its agent starting (or a standby taking the prompt).",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300}}),
	}
	for _, o := range []string{OutcomeOK, OutcomeError} {
		m.runs.WithLabelValues(o) // a baseline of 0 from the start
	}
	m.Registry.MustRegister(m.runs, m.runDuration, m.startLatency, &stateCollector{src: src},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// RunDone counts a finished run. A nil Metrics does nothing.
func (m *Metrics) RunDone(ok bool, took time.Duration) {
	if m == nil {
		return
	}
	outcome := OutcomeOK
	if !ok {
		outcome = OutcomeError
	}
	m.runs.WithLabelValues(outcome).Inc()
	m.runDuration.Observe(took.Seconds())
}

// AgentStarted observes how long a message waited for its agent.
func (m *Metrics) AgentStarted(wait time.Duration) {
	if m == nil {
		return
	}
	m.startLatency.Observe(max(0, wait.Seconds()))
}

// Handler serves the registry to whoever sends "Authorization: Bearer
// TOKEN" with token's current value; with none set there is no /metrics
// (404), and a wrong or missing token is 403.
func (m *Metrics) Handler(token func() string) http.Handler {
	serve := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := token()
		if want == "" {
			http.NotFound(w, r)
			return
		}
		got := r.Header.Get("Authorization")
		if subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+want)) != 1 {
			http.Error(w, "metrics need Authorization: Bearer <console.metricsToken>", http.StatusForbidden)
			return
		}
		serve.ServeHTTP(w, r)
	})
}
