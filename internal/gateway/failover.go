package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// send forwards one model request along the run's route: to the chosen
// upstream, and when it fails before a byte of its answer reached the
// agent (a failover status, a refused connection, no headers or no first
// bytes within the timeout) to each fallback in turn, never twice to one.
// When none answered, the agent gets an error the SDK does not retry,
// naming each failure, so the run ends with one plain sentence instead of
// minutes of retries.
func (r *Gateway) send(w http.ResponseWriter, req *http.Request, real string, body []byte) {
	rt := r.cfg.Route
	if r.cfg.Routes != nil {
		if next := r.cfg.Routes(); len(next.Targets) > 0 {
			rt = next
		}
	}
	var fails []string
	for _, t := range rt.order(time.Now()) {
		served := Served{Target: t, Fallback: t.Key() != rt.Targets[0].Key()}
		resp, first, cancel, err := r.attempt(req, t, real, body, rt.timeout())
		if req.Context().Err() != nil {
			if err == nil {
				resp.Body.Close()
				cancel()
			}
			return // the agent went away: nobody to answer
		}
		if err != nil {
			var se statusError
			if errors.As(err, &se) && r.cfg.Meter != nil {
				// The meter keeps what the API said of its limits (retry-after).
				r.cfg.Meter.Answered(se.status, se.header, served)
			}
			fails = append(fails, t.Key()+": "+err.Error())
			if rt.Board != nil {
				rt.Board.Failed(t.Key(), time.Now())
			}
			r.cfg.Log.Warn().Str("group", r.cfg.Group).Str("upstream", t.Key()).Bool("fallback", served.Fallback).
				Msg("the model upstream failed; trying the next: " + err.Error())
			continue
		}
		if rt.Board != nil {
			rt.Board.Succeeded(t.Key())
		}
		if served.Fallback {
			r.cfg.Log.Info().Str("group", r.cfg.Group).Str("upstream", t.Key()).Msg("a model request served by a fallback")
		}
		r.stream(w, resp, first, cancel, served, rt.timeout())
		return
	}
	why := "nanoclaw relay: no model upstream answered (" + strings.Join(fails, "; ") + ")"
	if r.cfg.Meter != nil {
		r.cfg.Meter.Failed(why)
	}
	// 400 is what the SDK and the CLI give up on at once (they retry
	// 408, 409, 429 and 5xx); X-Should-Retry says the same.
	apiError(w, http.StatusBadRequest, "invalid_request_error", why)
}

// limitedRE finds, in the relay's "no model upstream answered (…)", each
// failure and whether it was a rate limit or overload (429, 529).
var (
	unansweredRE = regexp.MustCompile(`no model upstream answered \((.*)\)`)
	limitedRE    = regexp.MustCompile(`^\S+: HTTP (429|529)\b`)
)

// Limited tells whether the relay's error text says every upstream was
// only rate limited or overloaded (it answered, just not now), rather than
// not answering at all.
func Limited(why string) bool {
	m := unansweredRE.FindStringSubmatch(why)
	if m == nil {
		return false
	}
	for _, f := range strings.Split(m[1], "; ") {
		if !limitedRE.MatchString(f) {
			return false
		}
	}
	return true
}

// statusError is an upstream's failover status (429, 5xx, 529).
type statusError struct {
	status int
	header http.Header
	msg    string // ", the API's message" or ""
}

func (e statusError) Error() string { return fmt.Sprintf("HTTP %d%s", e.status, e.msg) }

// errSilent is an upstream that said nothing within the timeout.
type errSilent struct {
	what string
	d    time.Duration
}

func (e errSilent) Error() string { return fmt.Sprintf("no %s within %s", e.what, e.d) }

// attempt sends the request to t and waits for its headers and the first
// bytes of its body, each within the timeout. A failover status or no
// answer is an error; any other answer is returned with its first chunk
// read, and the cancel that ends it.
func (r *Gateway) attempt(in *http.Request, t Target, real string, body []byte, timeout time.Duration) (*http.Response, []byte, context.CancelFunc, error) {
	u, err := targetURL(t, in.URL.Path, in.URL.RawQuery)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(in.Context()))
	stopOnLeave := context.AfterFunc(in.Context(), cancel) // the agent went away
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(withModel(body, t)))
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	out.Header = in.Header.Clone()
	keepHeaders(out.Header)
	out.Header.Set("Accept-Encoding", identity) // the meter reads the answer (decode.go)
	credentialFor(out.Header, t, real)
	timer := time.AfterFunc(timeout, cancel)
	resp, err := upstreamTransport.RoundTrip(out)
	if err != nil {
		fired := !timer.Stop()
		cancel()
		stopOnLeave()
		if fired && in.Context().Err() == nil {
			return nil, nil, nil, errSilent{"response headers", timeout}
		}
		return nil, nil, nil, shortErr(err)
	}
	if enc := decode(resp); enc != "" {
		r.cfg.Log.Warn().Str("group", r.cfg.Group).Str("upstream", t.Key()).Str("encoding", enc).
			Msg("the model upstream compressed its answer in a way the relay cannot read; it goes to the agent as it came, and its usage is not counted")
	}
	if failoverStatus[resp.StatusCode] {
		timer.Stop()
		msg := apiMessage(resp.Body)
		resp.Body.Close()
		cancel()
		stopOnLeave()
		return nil, nil, nil, statusError{resp.StatusCode, resp.Header, msg}
	}
	// The first bytes decide too: a stream that opens and then says
	// nothing has not yet given the agent a byte, so another may answer.
	buf := make([]byte, 32<<10)
	n, rerr := resp.Body.Read(buf)
	if n == 0 && rerr != nil && rerr != io.EOF {
		fired := !timer.Stop()
		resp.Body.Close()
		cancel()
		stopOnLeave()
		if fired && in.Context().Err() == nil {
			return nil, nil, nil, errSilent{"answer", timeout}
		}
		return nil, nil, nil, shortErr(rerr)
	}
	if !timer.Stop() {
		// The timeout struck as the first bytes came: the rest of this
		// answer is cut off already, and none of it reached the agent.
		resp.Body.Close()
		cancel()
		stopOnLeave()
		return nil, nil, nil, errSilent{"answer", timeout}
	}
	if rerr != nil {
		resp.Body = eofBody{resp.Body, rerr}
	}
	return resp, buf[:n], func() { cancel(); stopOnLeave() }, nil
}

// eofBody ends at once: the first read already saw the end.
type eofBody struct {
	io.ReadCloser
	err error
}

func (b eofBody) Read([]byte) (int, error) { return 0, b.err }

// stream copies the chosen answer to the agent as it comes, metered; a
// stream silent for the timeout is cut (the upstream is not answering),
// one that keeps streaming never is.
func (r *Gateway) stream(w http.ResponseWriter, resp *http.Response, first []byte, cancel context.CancelFunc, s Served, timeout time.Duration) {
	defer cancel()
	silent := time.AfterFunc(timeout, cancel)
	defer silent.Stop()
	body := r.metered(resp, s)
	defer body.Close()
	h := w.Header()
	for k, v := range resp.Header {
		// Without the upstream's Content-Length the answer is chunked, and
		// its end reaches the agent only after the handler returns: after
		// the meter recorded it (body.Close).
		if !hopHeaders[k] && k != "Content-Length" {
			h[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	if len(first) > 0 {
		body.meter.Write(first)
		if _, err := w.Write(first); err != nil {
			return
		}
		rc.Flush()
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			silent.Reset(timeout)
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			rc.Flush()
		}
		if err != nil {
			if err != io.EOF && !silent.Stop() {
				r.cfg.Log.Warn().Str("group", r.cfg.Group).Str("upstream", s.Key()).Dur("silent", timeout).Msg("the model upstream's answer fell silent; cut")
				if r.cfg.Meter != nil {
					r.cfg.Meter.Failed(fmt.Sprintf("nanoclaw relay: %s fell silent for %s in the middle of an answer", s.Key(), timeout))
				}
			}
			return
		}
	}
}

// hopHeaders are the response headers that describe one connection, not
// the answer.
var hopHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Transfer-Encoding": true, "Trailer": true,
	"Upgrade": true, "Proxy-Connection": true, "Proxy-Authenticate": true}

// withModel sets the request's model to the target's, as the provider
// names it; a request that is not a JSON object, or a target without a
// model of its own, goes as it is.
func withModel(body []byte, t Target) []byte {
	name := t.Upstream
	if name == "" {
		name = t.Model
	}
	if name == "" {
		return body
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return body
	}
	m["model"], _ = json.Marshal(name)
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// credentialFor puts the target's credential in h: the run's own in
// place of the placeholder for the built-in provider, else the
// provider's own (or none), as its auth scheme says: the daemon's key
// never goes to another provider.
func credentialFor(h http.Header, t Target, real string) {
	if t.Builtin {
		if real != "" {
			swap(h, real)
		}
		return
	}
	h.Del("X-Api-Key")
	h.Del("Authorization")
	if t.Credential == "" {
		return // a local server that takes none
	}
	if t.Auth == AuthBearer {
		h.Set("Authorization", "Bearer "+t.Credential)
		return
	}
	h.Set("X-Api-Key", t.Credential)
}

// apiMessage reads the API's error message from a failed answer, for the
// log and the agent (", message" or "").
func apiMessage(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, 4<<10))
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return ", " + e.Error.Message
	}
	return ""
}

// shortErr drops the URL a transport error repeats: the target's name
// already says where.
func shortErr(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			s := inner.Error()
			if i := strings.LastIndex(s, ": "); i >= 0 && strings.Contains(s, "connect") {
				return errors.New(s[i+2:])
			}
			return inner
		}
	}
	return err
}
