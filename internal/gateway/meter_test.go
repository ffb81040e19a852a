package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/testkit/mockapi"
)

// meter is a Meter whose answers a test sets and whose calls it reads.
type meter struct {
	refuse *Refusal

	mu       sync.Mutex
	statuses []int
	done     []Tokens
	model    string
	served   []Served
	failed   []string
}

func (m *meter) Admit(context.Context) *Refusal { return m.refuse }
func (m *meter) Answered(status int, _ http.Header, s Served) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.statuses = append(m.statuses, status)
	m.served = append(m.served, s)
}
func (m *meter) Failed(why string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed = append(m.failed, why)
}
func (m *meter) Done(_ Served, model string, t Tokens) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.model, m.done = model, append(m.done, t)
}
func (m *meter) calls() ([]int, []Tokens) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.statuses...), append([]Tokens(nil), m.done...)
}

// The relay streams each event on as it comes — the agent reads
// message_start while the upstream still holds back the rest — and the
// usage is counted (the final output count, not a sum) by the time the
// agent sees the answer end.
func TestRelayMetersWithoutHoldingBack(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-haiku-4-5\",\"usage\":{\"input_tokens\":11,\"cache_creation_input_tokens\":22,\"cache_read_input_tokens\":33,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		<-release
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":44}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	m := &meter{}
	run, client := open(t, Config{Group: "family", Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-real"}, Meter: m})
	req, _ := http.NewRequest("POST", "http://127.0.0.1:3128/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Api-Key", run.Env()["ANTHROPIC_API_KEY"])
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first, err := br.ReadString('\n')
	if err != nil || first != "event: message_start\n" {
		t.Fatalf("first line %q, %v", first, err)
	}
	if _, done := m.calls(); len(done) != 0 {
		t.Fatal("counted before the answer ended")
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || !strings.Contains(string(rest), "message_stop") {
		t.Fatalf("rest %q, %v", rest, err)
	}
	statuses, done := m.calls()
	if len(statuses) != 1 || statuses[0] != 200 || len(done) != 1 || done[0] != (Tokens{Input: 11, Output: 44, CacheWrite: 22, CacheRead: 33}) || m.model != "claude-haiku-4-5" {
		t.Errorf("meter heard %v %+v %q", statuses, done, m.model)
	}
}

// A request the meter refuses never reaches the upstream: the agent gets
// the API's error shape with the meter's words; an upstream refusal of the
// credential is heard by the meter and counted as nothing.
func TestRelayRefusalsAndErrors(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
	}))
	defer up.Close()
	m := &meter{refuse: &Refusal{Status: 400, Type: "invalid_request_error", Message: "the budget of family is spent"}}
	run, client := open(t, Config{Group: "family", Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-real"}, Meter: m})
	post := func() (int, []byte) {
		req, _ := http.NewRequest("POST", "http://127.0.0.1:3128/v1/messages", strings.NewReader(`{}`))
		req.Header.Set("X-Api-Key", run.Env()["ANTHROPIC_API_KEY"])
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, body := post()
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal(body, &e); err != nil || code != 400 || e.Type != "error" || e.Error.Type != "invalid_request_error" || e.Error.Message != "the budget of family is spent" || hits.Load() != 0 {
		t.Errorf("refusal: %d %s (upstream hit %d times)", code, body, hits.Load())
	}
	m.refuse = nil
	if code, _ := post(); code != 401 || hits.Load() != 1 {
		t.Errorf("upstream's 401: got %d, %d hits", code, hits.Load())
	}
	if statuses, done := m.calls(); len(statuses) != 1 || statuses[0] != 401 || len(done) != 0 {
		t.Errorf("meter heard %v, counted %+v", statuses, done)
	}
}

// The main group's relay listens on the loopback, forwards only to the
// model API (no proxy: an absolute URL goes to the API too) and needs
// the run's placeholder like any other.
func TestLoopbackRelay(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, r.Header.Get("X-Api-Key")+" "+r.URL.Path)
	}))
	defer up.Close()
	run, err := OpenLoopback(Config{Group: "main", Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-real"}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if !strings.HasPrefix(run.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %s", run.URL())
	}
	for _, key := range []string{run.Env()["ANTHROPIC_API_KEY"], "sk-guess"} {
		req, _ := http.NewRequest("POST", run.URL()+"/v1/messages", strings.NewReader(`{}`))
		req.Header.Set("X-Api-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 1 || paths[0] != "sk-real /v1/messages" {
		t.Errorf("upstream saw %q", paths)
	}
}

// storeMeter records each answer in a real SQLite usage table, as the
// daemon's meter does (usage.Store.Record, which imports this package)
// before the answer ends for the agent.
type storeMeter struct{ db *store.DB }

func (storeMeter) Admit(context.Context) *Refusal    { return nil }
func (storeMeter) Answered(int, http.Header, Served) {}
func (storeMeter) Failed(string)                     {}
func (m storeMeter) Done(_ Served, model string, t Tokens) {
	m.db.ExecContext(context.Background(), `INSERT INTO usage_requests
		(at, group_folder, run_id, provider, model, input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd, priced)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		time.Now().UnixMilli(), "g", "r", "anthropic", model, t.Input, t.Output, t.CacheWrite, t.CacheRead, 0.0, false)
}

// BenchmarkRelayAnswer: one streamed answer through the relay, from the
// request to the agent seeing its end, bare and with its usage recorded in
// SQLite: what metering adds to answer → sent.
func BenchmarkRelayAnswer(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(stream))
	}))
	defer up.Close()
	db, err := store.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct {
		name  string
		meter Meter
	}{{"bare", nil}, {"metered", storeMeter{db}}} {
		b.Run(c.name, func(b *testing.B) {
			run, client := open(b, Config{Group: "g", Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "k"}, Meter: c.meter})
			for b.Loop() {
				req, _ := http.NewRequest("POST", "http://127.0.0.1:3128/v1/messages", strings.NewReader(`{}`))
				req.Header.Set("X-Api-Key", run.Env()["ANTHROPIC_API_KEY"])
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// stream is an answer as the API streams it, with its usage.
const stream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":1200,\"cache_creation_input_tokens\":300,\"cache_read_input_tokens\":4000,\"output_tokens\":1}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello there\"}}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":87}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// slowMeter takes its time to record, as SQLite on a busy machine does.
type slowMeter struct{ meter }

func (s *slowMeter) Done(sv Served, model string, t Tokens) {
	time.Sleep(time.Millisecond)
	s.meter.Done(sv, model, t)
}

// The relay never cuts an answer short: answers one after the other on
// the same connections, each recorded before it ends, all arrive whole
// and are counted whole. (When the agent's request body was streamed
// upstream, the transport read it once more after the answer had begun,
// found it closed and dropped the connection: a few answers in a
// thousand were cut.)
func TestRelayNeverCutsAnAnswer(t *testing.T) {
	mock := mockapi.New(t)
	mock.SetUsage(mockapi.Usage{Input: 1000, Output: 500})
	m := &slowMeter{}
	run, client := open(t, Config{Group: "family", Upstream: mock.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-real"}, Meter: m})
	const n = 1000
	for i := 0; i < n; i++ {
		req, _ := http.NewRequest("POST", "http://127.0.0.1:3128/v1/messages", strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("X-Api-Key", run.Env()["ANTHROPIC_API_KEY"])
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !strings.Contains(string(b), "message_stop") {
			t.Fatalf("answer %d was cut: %v, it ends %q", i, err, b[max(0, len(b)-60):])
		}
	}
	_, done := m.calls()
	for i, d := range done {
		if d.Output != 500 {
			t.Fatalf("answer %d counted %+v", i, d)
		}
	}
	if len(done) != n {
		t.Errorf("%d answers counted, want %d", len(done), n)
	}
}

// A request larger than the API takes is refused by the relay, which
// holds at most maxRequest of it, and never reaches the upstream.
func TestRelayRefusesAHugeRequest(t *testing.T) {
	var hits atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer up.Close()
	run, client := open(t, Config{Group: "family", Upstream: up.URL, Secrets: map[string]string{"ANTHROPIC_API_KEY": "sk-real"}})
	req, _ := http.NewRequest("POST", "http://127.0.0.1:3128/v1/messages", io.LimitReader(zeros{}, maxRequest+1))
	req.Header.Set("X-Api-Key", run.Env()["ANTHROPIC_API_KEY"])
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `"request_too_large"`) || hits.Load() != 0 {
		t.Errorf("%d %s, upstream hit %d times", resp.StatusCode, body, hits.Load())
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
