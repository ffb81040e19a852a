// Package metrics is nanoclawd's Prometheus series, in a registry of its
// own. What the daemon keeps in its database (messages, the outbox, the
// audit trail, IPC verdicts, runs, model usage) is read at scrape time
// from a Source: running totals that triggers keep as rows are written,
// so no counter goes down, not with pruning nor across a restart, and no
// scrape counts a whole table. Only what exists nowhere else (how long
// runs take, how long a message waits for its agent) is observed by the
// router, in memory (RunDone, AgentStarted): those two histograms count
// from the daemon's start.
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
// missing while the daemon is idle. The counts never go down.
type Snapshot struct {
	MessagesIn  map[string]float64 // channel → messages received and stored
	MessagesOut map[string]float64 // channel → messages sent
	Runs        map[string]float64 // "ok" | "error" → agent runs that ended
	IPC         map[string]float64 // "handled" | "refused" → IPC request files decided
	Violations  map[string]float64 // kind → audit-trail records
	Backlog     float64            // outbox messages waiting to be sent
	Standbys    float64            // agents started ahead, waiting
	Usage       []Usage            // one per group, provider and model
	Connected   map[string]bool    // channel → connected
	// ModelAPI is the standing problems by kind (usage.HealthKinds).
	ModelAPI map[string]bool
}

// Usage is one group's model usage with one provider and model (both ""
// for the series a group has from the start, before its first request).
type Usage struct {
	Group, Provider, Model                     string
	Input, Output, CacheWrite, CacheRead, Cost float64
}

// Source reads a Snapshot at scrape time.
type Source interface {
	Snapshot(ctx context.Context) (Snapshot, error)
}

// Metrics is the registry and the few series observed as they happen.
type Metrics struct {
	Registry     *prometheus.Registry
	runDuration  prometheus.Histogram
	startLatency *prometheus.HistogramVec
}

// How an agent took a message, the values of the start-latency
// histogram's label "start".
const (
	StartCold     = "cold"      // an agent process started for it
	StartStandby  = "standby"   // an agent started ahead was handed it
	StartFollowUp = "follow_up" // an agent already answering was handed it
)

// New is the registry over src, with Go and process series beside ours.
func New(src Source) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		runDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "nanoclawd_run_duration_seconds",
			Help: "How long agent runs took, from start to end.", Buckets: []float64{1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800}}),
		startLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nanoclawd_inbound_to_agent_start_seconds",
			Help: "From a message's arrival to an agent taking it, by how: an agent started for it (cold), " +
				"one started ahead (standby) or one already answering (follow_up).",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300}}, []string{"start"}),
	}
	for _, s := range []string{StartCold, StartStandby, StartFollowUp} {
		m.startLatency.WithLabelValues(s) // a baseline of 0 from the start
	}
	m.Registry.MustRegister(m.runDuration, m.startLatency, &stateCollector{src: src},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// RunDone observes how long a finished run took (nanoclawd_runs_total
// is counted in the database, with the run's record). A nil Metrics does
// nothing.
func (m *Metrics) RunDone(took time.Duration) {
	if m == nil {
		return
	}
	m.runDuration.Observe(took.Seconds())
}

// AgentStarted observes how long a message waited until an agent took
// it, and how (StartCold, StartStandby, StartFollowUp). It is on the way
// from a message to its agent: memory only, no lock but the histogram's.
func (m *Metrics) AgentStarted(start string, wait time.Duration) {
	if m == nil {
		return
	}
	m.startLatency.WithLabelValues(start).Observe(max(0, wait.Seconds()))
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
