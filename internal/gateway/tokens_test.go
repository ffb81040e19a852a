package gateway

import (
	"strings"
	"testing"
)

// A stream as the Messages API sends it: message_start with the input,
// cache and a first output count, text deltas (one of them quoting the
// event names), message_delta with the final output count.
const answerStream = "event: message_start\r\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"usage":{"input_tokens":1200,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":1}}}` + "\r\n\r\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"say \"type\":\"message_delta\",\"usage\":{\"output_tokens\":999999}"}}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":87}}` + "\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func TestTokenCounterReadsAStreamInAnyChunks(t *testing.T) {
	want := Tokens{Input: 1200, Output: 87, CacheWrite: 300, CacheRead: 4000}
	for _, size := range []int{1, 2, 7, 64, len(answerStream)} {
		m := newTokenCounter("text/event-stream; charset=utf-8")
		for i := 0; i < len(answerStream); i += size {
			if n, err := m.Write([]byte(answerStream[i:min(i+size, len(answerStream))])); err != nil || n != min(size, len(answerStream)-i) {
				t.Fatalf("Write: %d, %v", n, err)
			}
		}
		model, got, ok := m.Result()
		if !ok || model != "claude-sonnet-4-5-20250929" || got != want {
			t.Errorf("chunks of %d: %q %+v %v, want %+v", size, model, got, ok, want)
		}
	}
}

// Newer API versions repeat the input and cache counts in message_delta:
// they replace, never add.
func TestTokenCounterTakesTheLastCounts(t *testing.T) {
	m := newTokenCounter("text/event-stream")
	m.Write([]byte(`data: {"type":"message_start","message":{"model":"m","usage":{"input_tokens":10,"output_tokens":1}}}` + "\n"))
	m.Write([]byte(`data: {"type":"message_delta","usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":40}}` + "\n"))
	if _, got, _ := m.Result(); got != (Tokens{Input: 10, Output: 40, CacheRead: 5}) {
		t.Errorf("got %+v", got)
	}
}

func TestTokenCounterReadsAJSONAnswer(t *testing.T) {
	m := newTokenCounter("application/json")
	body := `{"id":"msg_1","type":"message","model":"claude-haiku-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":7,"output_tokens":3,"cache_read_input_tokens":2}}`
	m.Write([]byte(body[:20]))
	m.Write([]byte(body[20:]))
	model, got, ok := m.Result()
	if !ok || model != "claude-haiku-4-5" || got != (Tokens{Input: 7, Output: 3, CacheRead: 2}) {
		t.Errorf("%q %+v %v", model, got, ok)
	}
}

// What reports no usage is not counted: an error, a token count, a
// stream cut off before message_start, an endless line.
func TestTokenCounterCountsNothingWithoutUsage(t *testing.T) {
	for name, c := range map[string]struct{ ct, body string }{
		"error":        {"application/json", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		"count tokens": {"application/json", `{"input_tokens":42}`},
		"cut off":      {"text/event-stream", "event: message_start\ndata: {\"type\":\"message_st"},
		"long line":    {"text/event-stream", "data: " + strings.Repeat("x", 3*maxLine) + "\n"},
	} {
		m := newTokenCounter(c.ct)
		m.Write([]byte(c.body))
		if _, got, ok := m.Result(); ok {
			t.Errorf("%s: counted %+v", name, got)
		}
	}
}
