package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stateCollector turns a Snapshot read at scrape time into series.
type stateCollector struct{ src Source }

var (
	descIn = prometheus.NewDesc("nanoclawd_messages_received_total",
		"Messages received and stored, by channel.", []string{"channel"}, nil)
	descOut = prometheus.NewDesc("nanoclawd_messages_sent_total",
		"Messages the outbox sent, by channel.", []string{"channel"}, nil)
	descRuns = prometheus.NewDesc("nanoclawd_runs_total",
		"Agent runs that ended, by outcome (ok or error).", []string{"outcome"}, nil)
	descIPC = prometheus.NewDesc("nanoclawd_ipc_files_total",
		"IPC request files the watcher decided, by verdict (handled or refused).", []string{"verdict"}, nil)
	descViolations = prometheus.NewDesc("nanoclawd_violations_total",
		"Records of the audit trail (blocked actions and the owner's changes), by kind.", []string{"kind"}, nil)
	descBacklog = prometheus.NewDesc("nanoclawd_outbox_backlog",
		"Messages waiting in the outbox to be sent.", nil, nil)
	descStandbys = prometheus.NewDesc("nanoclawd_standby_agents",
		"Agents started ahead, waiting for a message.", nil, nil)
	descTokens = prometheus.NewDesc("nanoclawd_model_tokens_total",
		"Model tokens counted at the relay, by group, provider, model and type.", []string{"group", "provider", "model", "type"}, nil)
	descCost = prometheus.NewDesc("nanoclawd_model_cost_usd_total",
		"Cost of the model requests counted at the relay (USD at usage.prices), by group, provider and model.", []string{"group", "provider", "model"}, nil)
	descConnected = prometheus.NewDesc("nanoclawd_channel_connected",
		"1 while the channel is connected.", []string{"channel"}, nil)
	descModelAPI = prometheus.NewDesc("nanoclawd_model_api_problem",
		"1 while the model API has a standing problem of this kind (credential: refused; rate: limited; down: no upstream answers).", []string{"kind"}, nil)
	descScrapeError = prometheus.NewDesc("nanoclawd_scrape_error",
		"1 when the daemon's state could not be read for this scrape.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descIn, descOut, descRuns, descIPC, descViolations, descBacklog, descStandbys,
		descTokens, descCost, descConnected, descModelAPI, descScrapeError} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.src.Snapshot(ctx)
	failed := 0.0
	if err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(descScrapeError, prometheus.GaugeValue, failed)
	if err != nil {
		return
	}
	counters := func(d *prometheus.Desc, m map[string]float64) {
		for k, v := range m {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, k)
		}
	}
	counters(descIn, s.MessagesIn)
	counters(descOut, s.MessagesOut)
	counters(descRuns, s.Runs)
	counters(descIPC, s.IPC)
	counters(descViolations, s.Violations)
	ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, s.Backlog)
	ch <- prometheus.MustNewConstMetric(descStandbys, prometheus.GaugeValue, s.Standbys)
	for _, u := range s.Usage {
		for _, t := range []struct {
			name string
			v    float64
		}{{"input", u.Input}, {"output", u.Output}, {"cache_write", u.CacheWrite}, {"cache_read", u.CacheRead}} {
			ch <- prometheus.MustNewConstMetric(descTokens, prometheus.CounterValue, t.v, u.Group, u.Provider, u.Model, t.name)
		}
		ch <- prometheus.MustNewConstMetric(descCost, prometheus.CounterValue, u.Cost, u.Group, u.Provider, u.Model)
	}
	gauges := func(d *prometheus.Desc, m map[string]bool) {
		for k, on := range m {
			v := 0.0
			if on {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, k)
		}
	}
	gauges(descConnected, s.Connected)
	gauges(descModelAPI, s.ModelAPI)
}
