// Package mockapi is a local stand-in for the Anthropic Messages API, for
// tests that run the real Claude Agent SDK (and the claude CLI it starts)
// against scripted model turns. It streams server-sent events the way the
// real API does, compressed when the request allows it (encoding.go),
// records every request body so a test can prove a secret never left the
// machine, and answers the side requests the CLI makes (token counting,
// session titles) with something sane.
package mockapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// ToolUse is one tool call the scripted model makes.
type ToolUse struct {
	Name  string
	Input any // marshalled to JSON as the tool's input
}

// Turn is one scripted model answer: optional text, then tool calls. A turn
// without tool calls ends the model's turn (stop_reason end_turn).
type Turn struct {
	Text  string
	Tools []ToolUse
}

// Text is a turn that only says s and stops.
func Text(s string) Turn { return Turn{Text: s} }

// Tool is a turn that calls one tool.
func Tool(name string, input any) Turn { return Turn{Tools: []ToolUse{{Name: name, Input: input}}} }

// Request is one request the mock received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	At     time.Time // when it arrived
	// Encoding is how the mock encodes its answer ("" = not compressed).
	Encoding string
}

// Server is a running mock. Its URL goes into ANTHROPIC_BASE_URL.
type Server struct {
	URL string

	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	requests []Request
	scripts  []script
	msgSeq   int
	usage    Usage
	failure  *failure
	hang     chan struct{} // non-nil: Messages requests get no answer until it closes
	encoding string        // SetEncoding's
}

// Usage is what every answer reports it used; the default is 10 input
// and 10 output tokens.
type Usage struct {
	Input, Output, CacheWrite, CacheRead int
}

type failure struct {
	status     int
	kind, msg  string
	retryAfter string
	left       int // requests still to fail; 0: every one
}

// SetUsage makes every answer from now on report u: a streamed one in
// message_start (with an output count of 1) and, the final output count,
// in message_delta.
func (s *Server) SetUsage(u Usage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage = u
}

// Fail makes every Messages request from now on answer status with an
// API error of type kind (and a retry-after header if retryAfter is not
// ""); Fail(0, "", "", "") answers again.
func (s *Server) Fail(status int, kind, msg, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure = nil
	if status != 0 {
		s.failure = &failure{status: status, kind: kind, msg: msg, retryAfter: retryAfter}
	}
}

// FailNext makes only the next n Messages requests fail as Fail says;
// the ones after are answered again.
func (s *Server) FailNext(n int, status int, kind, msg, retryAfter string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure = &failure{status: status, kind: kind, msg: msg, retryAfter: retryAfter, left: n}
}

// Hang makes every Messages request from now on get no answer at all (the
// connection stays open, no headers) until Hang(false) or the request's
// client gives up: an upstream that accepts and never answers.
func (s *Server) Hang(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hang != nil {
		close(s.hang)
		s.hang = nil
	}
	if on {
		s.hang = make(chan struct{})
	}
}

// Model is the model a Messages request named (its JSON body's "model").
func (r Request) Model() string {
	var m struct {
		Model string `json:"model"`
	}
	json.Unmarshal(r.Body, &m)
	return m.Model
}

func (s *Server) usageNow() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.usage == (Usage{}) {
		return Usage{Input: 10, Output: 10}
	}
	return s.usage
}

type script struct {
	key   string
	turns []Turn
}

// New starts a mock on 127.0.0.1 and stops it when the test ends. Until a
// script is added, every conversation gets the answer "ok".
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	t.Cleanup(func() { s.Hang(false); s.srv.Close() })
	return s
}

// Script sets the turns of every conversation whose first user message
// contains key ("" matches any conversation no other key matches). The
// conversation step (how many assistant messages the request already holds)
// picks the turn, so step 0 gets turns[0], the request carrying that answer
// and its tool results gets turns[1], and so on; a retried request gets the
// same turn again. Past the end of the script the model says "done".
func (s *Server) Script(key string, turns ...Turn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.scripts {
		if s.scripts[i].key == key {
			s.scripts[i].turns = turns
			return
		}
	}
	s.scripts = append(s.scripts, script{key: key, turns: turns})
}

// Requests returns the body of every request received so far, in order.
func (s *Server) Requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.requests))
	for i, r := range s.requests {
		out[i] = r.Body
	}
	return out
}

// Log returns every request received so far, with method and path.
func (s *Server) Log() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Contains reports whether secret appears in any request received so far,
// verbatim or as it looks inside a JSON string (escaped the way JavaScript
// does it, or Go with its HTML escaping).
func (s *Server) Contains(secret string) bool {
	forms := [][]byte{[]byte(secret), jsonString(secret, true), jsonString(secret, false)}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.requests {
		for _, f := range forms {
			if bytes.Contains(r.Body, f) {
				return true
			}
		}
	}
	return false
}

func jsonString(s string, escapeHTML bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s)
	return bytes.Trim(bytes.TrimSpace(buf.Bytes()), `"`)
}

// messagesRequest is the part of a Messages API request the mock reads.
type messagesRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	enc := s.encodingFor(r.Header)
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, At: time.Now(), Encoding: enc})
	fail, hang := s.failure, s.hang
	if fail != nil && fail.left > 0 && strings.HasPrefix(r.URL.Path, "/v1/messages") {
		if fail.left--; fail.left == 0 {
			s.failure = nil
		}
	}
	s.mu.Unlock()
	if hang != nil && strings.HasPrefix(r.URL.Path, "/v1/messages") {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
		return
	}
	w, done := encoded(w, enc)
	defer done()
	if fail != nil && strings.HasPrefix(r.URL.Path, "/v1/messages") {
		if fail.retryAfter != "" {
			w.Header().Set("Retry-After", fail.retryAfter)
		}
		apiError(w, fail.status, fail.kind, fail.msg)
		return
	}

	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		// A rough count is all the CLI uses it for (context-window bookkeeping).
		writeJSON(w, map[string]any{"input_tokens": len(body)/4 + 1})
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		var req messagesRequest
		if err := json.Unmarshal(body, &req); err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "mockapi: body is not a Messages request: "+err.Error())
			return
		}
		turn := s.answer(req)
		if req.Stream {
			s.stream(w, req.Model, turn)
		} else {
			writeJSON(w, s.message(req.Model, turn))
		}
	default:
		apiError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("mockapi: no route for %s %s", r.Method, r.URL.Path))
	}
}

// answer picks the scripted turn for a request. Side requests (no tools:
// session titles, summaries) get a short plain answer so they never consume
// a scripted step.
func (s *Server) answer(req messagesRequest) Turn {
	if len(req.Tools) == 0 {
		return Text("Scripted session")
	}
	first, step := "", 0
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			step++
		} else if first == "" {
			first = string(m.Content)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var turns []Turn
	found := false
	for _, sc := range s.scripts {
		if sc.key != "" && strings.Contains(first, sc.key) {
			turns, found = sc.turns, true
			break
		}
	}
	if !found {
		for _, sc := range s.scripts {
			if sc.key == "" {
				turns, found = sc.turns, true
			}
		}
	}
	if !found {
		return Text("ok")
	}
	if step < len(turns) {
		return turns[step]
	}
	return Text("done")
}

func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.msgSeq++
	return fmt.Sprintf("%s_mock%06d", prefix, s.msgSeq)
}

// blocks renders a turn as Messages API content blocks.
func (s *Server) blocks(turn Turn) []map[string]any {
	var out []map[string]any
	if turn.Text != "" || len(turn.Tools) == 0 {
		out = append(out, map[string]any{"type": "text", "text": turn.Text})
	}
	for _, tu := range turn.Tools {
		input := tu.Input
		if input == nil {
			input = map[string]any{}
		}
		out = append(out, map[string]any{"type": "tool_use", "id": s.nextID("toolu"), "name": tu.Name, "input": input})
	}
	return out
}

func stopReason(turn Turn) string {
	if len(turn.Tools) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

func (s *Server) message(model string, turn Turn) map[string]any {
	return map[string]any{
		"id": s.nextID("msg"), "type": "message", "role": "assistant", "model": model,
		"content": s.blocks(turn), "stop_reason": stopReason(turn), "stop_sequence": nil,
		"usage": usageJSON(s.usageNow(), false),
	}
}

// usageJSON is u as the API writes it; at the start of a stream the
// output count is the first token's.
func usageJSON(u Usage, start bool) map[string]any {
	out := u.Output
	if start {
		out = 1
	}
	return map[string]any{"input_tokens": u.Input, "output_tokens": out,
		"cache_creation_input_tokens": u.CacheWrite, "cache_read_input_tokens": u.CacheRead}
}

// stream writes the turn as the API's event stream: message_start, then per
// block content_block_start / delta / stop, then message_delta and
// message_stop, each event flushed as it is written.
func (s *Server) stream(w http.ResponseWriter, model string, turn Turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("request-id", s.nextID("req"))
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	u := s.usageNow()
	event := func(name string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": s.nextID("msg"), "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": usageJSON(u, true),
	}})
	event("ping", map[string]any{"type": "ping"})
	for i, b := range s.blocks(turn) {
		switch b["type"] {
		case "text":
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		case "tool_use":
			event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(turn), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.Output}})
	event("message_stop", map[string]any{"type": "message_stop"})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": msg}})
}
