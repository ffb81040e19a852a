package usage

import (
	"strings"
	"testing"
)

// A stream as the Messages API sends it: message_start with the input,
// cache and a first output count, text deltas (one of them quoting the
// event names), message_delta with the final output count.
const stream = "event: message_start\r\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"usage":{"input_tokens":1200,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":1}}}` + "\r\n\r\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"say \"type\":\"message_delta\",\"usage\":{\"output_tokens\":999999}"}}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":87}}` + "\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func TestMeterReadsAStreamInAnyChunks(t *testing.T) {
	want := Tokens{Input: 1200, Output: 87, CacheWrite: 300, CacheRead: 4000}
	for _, size := range []int{1, 2, 7, 64, len(stream)} {
		m := NewMeter("text/event-stream; charset=utf-8")
		for i := 0; i < len(stream); i += size {
			if n, err := m.Write([]byte(stream[i:min(i+size, len(stream))])); err != nil || n != min(size, len(stream)-i) {
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
func TestMeterTakesTheLastCounts(t *testing.T) {
	m := NewMeter("text/event-stream")
	m.Write([]byte(`data: {"type":"message_start","message":{"model":"m","usage":{"input_tokens":10,"output_tokens":1}}}` + "\n"))
	m.Write([]byte(`data: {"type":"message_delta","usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":40}}` + "\n"))
	if _, got, _ := m.Result(); got != (Tokens{Input: 10, Output: 40, CacheRead: 5}) {
		t.Errorf("got %+v", got)
	}
}

func TestMeterReadsAJSONAnswer(t *testing.T) {
	m := NewMeter("application/json")
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
func TestMeterCountsNothingWithoutUsage(t *testing.T) {
	for name, c := range map[string]struct{ ct, body string }{
		"error":        {"application/json", `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		"count tokens": {"application/json", `{"input_tokens":42}`},
		"cut off":      {"text/event-stream", "event: message_start\ndata: {\"type\":\"message_st"},
		"long line":    {"text/event-stream", "data: " + strings.Repeat("x", 3*maxLine) + "\n"},
	} {
		m := NewMeter(c.ct)
		m.Write([]byte(c.body))
		if _, got, ok := m.Result(); ok {
			t.Errorf("%s: counted %+v", name, got)
		}
	}
}

func TestPricesLookup(t *testing.T) {
	ps := DefaultPrices()
	for model, want := range map[string]float64{
		"claude-sonnet-4-5":          3,
		"claude-sonnet-4-5-20250929": 3,
		"claude-opus-4-20250514":     15,
		"claude-opus-4-0":            15,
		"claude-opus-4-6":            5,
		"claude-haiku-4-5-20251001":  1,
	} {
		if p, ok := ps.Lookup(model); !ok || p.Input != want {
			t.Errorf("%s: %+v %v, want input %g", model, p, ok, want)
		}
	}
	for _, model := range []string{"gpt-4o", "claude-opus", ""} {
		if p, ok := ps.Lookup(model); ok {
			t.Errorf("%s has a price: %+v", model, p)
		}
	}
	cost := Price{Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}.Cost(Tokens{Input: 1e6, Output: 2e6, CacheWrite: 4e6, CacheRead: 1e7})
	if want := 3 + 30 + 15 + 3.0; cost < want-1e-9 || cost > want+1e-9 {
		t.Errorf("cost %g, want %g", cost, want)
	}
}
