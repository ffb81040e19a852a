package gateway

import (
	"bytes"
	"encoding/json"
	"mime"
)

// Tokens is the usage of one model request, or a sum of them.
type Tokens struct {
	Input      int64 `json:"inputTokens"`
	Output     int64 `json:"outputTokens"`
	CacheWrite int64 `json:"cacheWriteTokens"`
	CacheRead  int64 `json:"cacheReadTokens"`
}

// tokenCounter reads a model answer as it passes through the relay and keeps
// the usage it reports. It is an io.Writer that never fails and never
// holds bytes back: the relay hands it each chunk after the chunk went
// on to the agent.
//
// A streamed answer (text/event-stream) reports usage twice: message_start
// carries the model, the input and cache tokens and a first output count;
// message_delta carries the final output count, which replaces the first
// (it is not added), and on newer API versions updated input and cache
// counts, which replace theirs too. A JSON answer carries model and usage
// in its body.
type tokenCounter struct {
	sse     bool
	line    []byte // the SSE line being read
	skip    bool   // the current line grew past maxLine: not one that carries usage
	body    []byte // a JSON answer, up to maxBody
	model   string
	tokens  Tokens
	seen    bool
	tooLong bool
}

const (
	maxLine = 64 << 10 // message_start and message_delta lines are far shorter
	maxBody = 8 << 20
)

// newTokenCounter reads an answer of the given Content-Type.
func newTokenCounter(contentType string) *tokenCounter {
	mt, _, _ := mime.ParseMediaType(contentType)
	return &tokenCounter{sse: mt == "text/event-stream"}
}

// Write reads the next chunk of the answer.
func (m *tokenCounter) Write(p []byte) (int, error) {
	if !m.sse {
		if len(m.body)+len(p) > maxBody {
			m.tooLong = true
		} else if !m.tooLong {
			m.body = append(m.body, p...)
		}
		return len(p), nil
	}
	rest := p
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if !m.skip {
				m.line = append(m.line, rest...)
				if len(m.line) > maxLine {
					m.line, m.skip = m.line[:0], true
				}
			}
			break
		}
		if !m.skip {
			m.line = append(m.line, rest[:i]...)
			m.event(m.line)
		}
		m.line, m.skip = m.line[:0], false
		rest = rest[i+1:]
	}
	return len(p), nil
}

// usageJSON is the usage object of the Messages API. Pointers tell a
// count that is there from one that is not.
type usageJSON struct {
	Input      *int64 `json:"input_tokens"`
	Output     *int64 `json:"output_tokens"`
	CacheWrite *int64 `json:"cache_creation_input_tokens"`
	CacheRead  *int64 `json:"cache_read_input_tokens"`
}

func (u *usageJSON) apply(t *Tokens) {
	for _, f := range []struct {
		from *int64
		to   *int64
	}{{u.Input, &t.Input}, {u.Output, &t.Output}, {u.CacheWrite, &t.CacheWrite}, {u.CacheRead, &t.CacheRead}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
}

var (
	startType = []byte(`"message_start"`)
	deltaType = []byte(`"message_delta"`)
)

// event reads one SSE line; only the data lines of message_start and
// message_delta are decoded.
func (m *tokenCounter) event(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok || !(bytes.Contains(data, startType) || bytes.Contains(data, deltaType)) {
		return
	}
	var ev struct {
		Type    string `json:"type"`
		Message struct {
			Model string     `json:"model"`
			Usage *usageJSON `json:"usage"`
		} `json:"message"`
		Usage *usageJSON `json:"usage"`
	}
	if json.Unmarshal(bytes.TrimSpace(data), &ev) != nil {
		return
	}
	switch {
	case ev.Type == "message_start" && ev.Message.Usage != nil:
		m.model = ev.Message.Model
		ev.Message.Usage.apply(&m.tokens)
		m.seen = true
	case ev.Type == "message_delta" && ev.Usage != nil:
		ev.Usage.apply(&m.tokens)
		m.seen = true
	}
}

// Result is the model and usage the answer reported; ok is false when it
// reported none (an error, a token count, an answer cut off before its
// first event).
func (m *tokenCounter) Result() (model string, t Tokens, ok bool) {
	if !m.sse && !m.tooLong && len(m.body) > 0 {
		var msg struct {
			Type  string     `json:"type"`
			Model string     `json:"model"`
			Usage *usageJSON `json:"usage"`
		}
		if json.Unmarshal(m.body, &msg) == nil && msg.Type == "message" && msg.Usage != nil {
			m.model, m.seen = msg.Model, true
			msg.Usage.apply(&m.tokens)
		}
		m.body = nil
	}
	return m.model, m.tokens, m.seen
}
