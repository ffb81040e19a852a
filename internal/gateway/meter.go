package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
)

// Meter is what the relay tells about the model requests it forwards:
// it counts their usage, keeps budgets and watches the credential.
type Meter interface {
	// Admit is asked before a request goes upstream; a non-nil Refusal
	// is answered to the agent instead.
	Admit(ctx context.Context) *Refusal
	// Answered is told the status and headers of the answer the agent
	// gets, as they come, and which upstream gave it.
	Answered(status int, h http.Header, s Served)
	// Failed is told when no upstream answered a request, or the one
	// answering fell silent: why names each failure.
	Failed(why string)
	// Done is told the usage an answer reported and the upstream that
	// served it, once its body has ended (or was cut off); model is the
	// model as configured (the served target's), else as the answer
	// named it. It is called only for answers that reported usage, before
	// the agent sees the answer end.
	Done(s Served, model string, t Tokens)
}

// Refusal is a request the relay answers itself, as the model API
// answers an error: the SDK turns it into an API error the agent can read.
type Refusal struct {
	Status  int
	Type    string // the API's error type, e.g. "billing_error"
	Message string
}

// refused asks the meter whether req may go upstream and, if not,
// answers it; it reports whether it did.
func (r *Gateway) refused(w http.ResponseWriter, req *http.Request) bool {
	if r.cfg.Meter == nil {
		return false
	}
	ref := r.cfg.Meter.Admit(req.Context())
	if ref == nil {
		return false
	}
	apiError(w, ref.Status, ref.Type, ref.Message)
	return true
}

// apiError answers as the model API answers an error.
func apiError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Should-Retry", "false") // the SDK would otherwise retry some statuses
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}})
}

// metered tells the meter the answer's status at once, and returns its
// body to be read through a tokenCounter as it streams to the agent.
func (r *Gateway) metered(resp *http.Response, s Served) *meteredBody {
	b := &meteredBody{ReadCloser: resp.Body, meter: newTokenCounter(resp.Header.Get("Content-Type")), run: r}
	if m := r.cfg.Meter; m != nil {
		m.Answered(resp.StatusCode, resp.Header, s)
		b.done = func(model string, t Tokens) {
			if s.Model != "" {
				model = s.Model
			}
			m.Done(s, model, t)
		}
	}
	return b
}

// meteredBody hands each chunk it reads to a tokenCounter after the
// chunk is in hand: the parse costs microseconds, never a wait for more.
// The usage is recorded on Close, which the relay calls once it has
// copied the whole answer to the agent and before the response ends.
type meteredBody struct {
	io.ReadCloser
	meter *tokenCounter
	done  func(model string, t Tokens)
	run   *Gateway
	once  sync.Once
	err   error // how the last read ended
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.meter.Write(p[:n])
	b.err = err
	return n, err
}

func (b *meteredBody) Close() error {
	err := b.ReadCloser.Close()
	if b.done == nil {
		return err
	}
	if b.err != io.EOF {
		// The agent went away, or the upstream broke off: what was read
		// so far is counted.
		b.run.cfg.Log.Warn().Str("group", b.run.cfg.Group).AnErr("read", b.err).Msg("a model answer ended before its end; its usage is counted as far as it came")
	}
	b.once.Do(func() {
		if model, t, ok := b.meter.Result(); ok {
			b.done(model, t)
		}
	})
	return err
}

// OpenLoopback starts a relay-only gateway on 127.0.0.1 for a run that is
// not confined (the main group): its agent holds placeholders too, and
// its requests are counted like every other group's. Env() then holds
// the placeholders; URL is what ANTHROPIC_BASE_URL becomes.
func OpenLoopback(cfg Config) (*Gateway, error) {
	u, err := upstreamURL(cfg.Upstream)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("relay on the loopback: %w", err)
	}
	cfg.RelayOnly = true
	return serve(ln, "", u, cfg), nil
}

// URL is the address the gateway listens on, for a loopback one.
func (r *Gateway) URL() string { return "http://" + r.ln.Addr().String() }

func upstreamURL(up string) (*url.URL, error) {
	if up == "" {
		up = DefaultUpstream
	}
	u, err := url.Parse(up)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the model API address %q (ANTHROPIC_BASE_URL of the daemon) is not an http(s) URL", up)
	}
	return u, nil
}

// maxRequest bounds what the relay holds of one request: above the
// Messages API's own limit (32 MB), so nothing it would take is refused.
const maxRequest = 40 << 20

var errTooLarge = fmt.Errorf("the request is larger than %d MiB", maxRequest>>20)

// bufferBody reads the request's body before it goes upstream. Streamed
// from the agent's connection instead, the transport may still read it
// (to check its end) after the answer has begun to flow back, when the
// server has already closed it: the transport then drops the upstream
// connection and cuts the answer (measured: a few in a thousand).
func bufferBody(req *http.Request) error {
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxRequest+1))
	req.Body.Close()
	if err != nil {
		return fmt.Errorf("reading the request: %w", err)
	}
	if len(b) > maxRequest {
		return errTooLarge
	}
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	return nil
}
