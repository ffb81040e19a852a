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
// When none answered, the relay gives up on the run (outage.go): its owner
// ends the attempt, and the agent gets an error naming each failure. A
// single upstream's transient failure goes to the agent as it came.
func (r *Gateway) send(w http.ResponseWriter, req *http.Request, real string, body []byte) {
	rt := r.cfg.Route
	if r.cfg.Routes != nil {
		if next := r.cfg.Routes(); len(next.Targets) > 0 {
			rt = next
		}
	}
	asked := askedOf(body)
	targets := rt.order(time.Now(), asked.Model)
	var (
		fails []string
		last  statusError
	)
	for i, t := range targets {
		served := Served{Target: t, Fallback: t.Key() != rt.Targets[0].Key()}
		resp, first, cancel, err := r.attempt(req, t, real, body, rt.timeout(), asked.Stream)
		if req.Context().Err() != nil {
			if err == nil {
				resp.Body.Close()
				cancel()
			}
			return // the agent went away: nobody to answer
		}
		if err != nil {
			last = statusError{}
			if errors.As(err, &last) && r.cfg.Meter != nil {
				// The meter keeps what the API said of its limits (retry-after).
				r.cfg.Meter.Answered(last.status, last.header, served)
			}
			fails = append(fails, t.Key()+": "+err.Error())
			var local errLocal
			if rt.Board != nil && !errors.As(err, &local) {
				rt.Board.Failed(memoryKey(t, asked.Model), time.Now())
			}
			msg := "the model upstream failed: "
			if i < len(targets)-1 {
				msg = "the model upstream failed; trying the next: "
			}
			r.cfg.Log.Warn().Str("group", r.cfg.Group).Str("upstream", t.Key()).Bool("fallback", served.Fallback).Msg(msg + err.Error())
			continue
		}
		r.outage.answered()
		if rt.Board != nil {
			rt.Board.Succeeded(memoryKey(t, asked.Model))
		}
		if served.Fallback {
			r.cfg.Log.Info().Str("group", r.cfg.Group).Str("upstream", t.Key()).Msg("a model request served by a fallback")
		}
		r.stream(w, resp, first, cancel, served, rt.timeout())
		return
	}
	why := "nanoclaw relay: no model upstream answered (" + strings.Join(fails, "; ") + ")"
	if len(targets) == 1 && last.status != 0 && r.outage.transient(why, rt.timeout(), r.giveUp) {
		// As the API itself answered: the SDK backs off and asks again.
		passOn(w, last)
		return
	}
	r.giveUp(why)
	r.answerOutage(w, why)
}

// giveUp ends the run's model requests: the meter and the run's owner hear
// why, once.
func (r *Gateway) giveUp(why string) {
	if !r.outage.giveUp(why) {
		return
	}
	r.cfg.Log.Warn().Str("group", r.cfg.Group).Msg("no model upstream answers; the run's attempt is ended: " + why)
	if r.cfg.Meter != nil {
		r.cfg.Meter.Failed(why)
	}
}

// answerOutage answers a request of a run the relay gave up on.
func (r *Gateway) answerOutage(w http.ResponseWriter, why string) {
	// 400 is what the SDK and the CLI are least eager to retry (they
	// retry 408, 409, 429 and 5xx); X-Should-Retry says the same. The
	// daemon ends the attempt whatever they do.
	apiError(w, http.StatusBadRequest, "invalid_request_error", why)
}

// passOn answers the agent with an upstream's failure as it came.
func passOn(w http.ResponseWriter, se statusError) {
	answerHeader(w.Header(), se.header)
	w.WriteHeader(se.status)
	w.Write(se.body)
}

// asked is what a request asks for that the relay routes by.
type asked struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
}

func askedOf(body []byte) asked {
	var a asked
	json.Unmarshal(body, &a)
	return a
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
	body   []byte // the start of the answer
}

func (e statusError) Error() string { return fmt.Sprintf("HTTP %d%s", e.status, apiMessage(e.body)) }

// errLocal is a request the relay could not make at all (a provider's
// URL it cannot use): not the upstream's failure.
type errLocal struct{ err error }

func (e errLocal) Error() string { return e.err.Error() }
func (e errLocal) Unwrap() error { return e.err }

// errSilent is an upstream that said nothing within the timeout.
type errSilent struct {
	what string
	d    time.Duration
}

func (e errSilent) Error() string { return fmt.Sprintf("no %s within %s", e.what, e.d) }

// attempt sends the request to t and waits, within the timeout, for its
// headers and the first bytes of its body (a streamed request) or its
// whole body (any other). A failover status or no answer is an error; any
// other answer is returned with what was read of it, and the cancel that
// ends it.
func (r *Gateway) attempt(in *http.Request, t Target, real string, body []byte, timeout time.Duration, streamed bool) (*http.Response, []byte, context.CancelFunc, error) {
	u, err := targetURL(t, in.URL.Path, in.URL.RawQuery)
	if err != nil {
		return nil, nil, nil, errLocal{err}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(in.Context()))
	stopOnLeave := context.AfterFunc(in.Context(), cancel) // the agent went away
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(withModel(body, t)))
	if err != nil {
		cancel()
		return nil, nil, nil, errLocal{err}
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
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		cancel()
		stopOnLeave()
		return nil, nil, nil, statusError{resp.StatusCode, resp.Header, b}
	}
	// The first bytes decide too: a stream that opens and then says
	// nothing has not yet given the agent a byte, so another may answer.
	// An answer that is not streamed comes whole or not at all.
	what := "answer"
	buf := make([]byte, 32<<10)
	n, rerr := resp.Body.Read(buf)
	if !streamed {
		what = "whole answer"
		buf, rerr = readWhole(resp.Body, buf[:n], rerr)
		n = len(buf)
	}
	if (n == 0 || !streamed) && rerr != nil && rerr != io.EOF {
		fired := !timer.Stop()
		resp.Body.Close()
		cancel()
		stopOnLeave()
		if fired && in.Context().Err() == nil {
			return nil, nil, nil, errSilent{what, timeout}
		}
		return nil, nil, nil, shortErr(rerr)
	}
	if !timer.Stop() {
		// The timeout struck as the first bytes came: the rest of this
		// answer is cut off already, and none of it reached the agent.
		resp.Body.Close()
		cancel()
		stopOnLeave()
		return nil, nil, nil, errSilent{what, timeout}
	}
	if rerr != nil {
		resp.Body = eofBody{resp.Body, rerr}
	}
	return resp, buf[:n], func() { cancel(); stopOnLeave() }, nil
}

// maxWhole bounds what the relay holds of an answer that is not streamed;
// past it, the rest flows on as it comes.
const maxWhole = 64 << 20

// readWhole reads the rest of an answer that is not streamed after its
// first chunk (got, and how its read ended).
func readWhole(body io.Reader, got []byte, err error) ([]byte, error) {
	for err == nil && len(got) < maxWhole {
		if len(got) == cap(got) {
			got = append(got, 0)[:len(got)]
		}
		var n int
		n, err = body.Read(got[len(got):cap(got)])
		got = got[:len(got)+n]
	}
	return got, err
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
	answerHeader(w.Header(), resp.Header)
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

// answerHeader copies an upstream answer's header to the agent's, but
// for the hop-by-hop ones and Content-Length: without it the answer is
// chunked, and its end reaches the agent only after the handler returns —
// after the meter recorded it (body.Close).
func answerHeader(dst, src http.Header) {
	for k, v := range src {
		if !hopHeaders[k] && k != "Content-Length" {
			dst[k] = v
		}
	}
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
func apiMessage(b []byte) string {
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
