package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// modelPaths are the only requests the relay forwards: the Messages API
// and its token counter. Anything else (files, batches, models, admin) is
// refused, so a placeholder in a command's hands is not a client for the
// whole API with the owner's key.
var modelPaths = map[string]bool{"/v1/messages": true, "/v1/messages/count_tokens": true}

// modelQuery are the query parameters the Claude SDKs send (?beta=true).
var modelQuery = map[string]bool{"beta": true}

// relayHeaders are the request headers that go upstream; with the
// prefixes below, every other header is dropped.
var relayHeaders = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Content-Type": true, "User-Agent": true,
	"X-Api-Key": true, "Authorization": true, "X-App": true, "X-Claude-Code-Session-Id": true,
}

var relayHeaderPrefixes = []string{"Anthropic-", "X-Stainless-"}

// modelRequest tells whether req is one the relay forwards, and if not, why.
func modelRequest(req *http.Request) (bool, string) {
	if req.Method != http.MethodPost || !modelPaths[req.URL.Path] {
		return false, "the relay forwards only POST /v1/messages and POST /v1/messages/count_tokens"
	}
	for k := range req.URL.Query() {
		if !modelQuery[k] {
			return false, fmt.Sprintf("the query parameter %q is not one the Messages API takes", k)
		}
	}
	return true, ""
}

// relay forwards a model-API request upstream with the real credential.
func (r *Gateway) relay(w http.ResponseWriter, req *http.Request) {
	target := req.Method + " " + req.URL.Path
	if ok, why := modelRequest(req); !ok {
		r.refuseRelay(w, req, target, http.StatusForbidden, "permission_error", why)
		return
	}
	real, ok := r.credential(req.Header)
	if !ok {
		r.refuseRelay(w, req, target, http.StatusUnauthorized, "authentication_error", "the request carries no credential of a running agent")
		return
	}
	if why := r.outage.over(); why != "" {
		r.answerOutage(w, why) // the run is being ended: nothing goes upstream again
		return
	}
	if r.refused(w, req) {
		return
	}
	if err := bufferBody(req); err != nil {
		apiError(w, http.StatusRequestEntityTooLarge, "request_too_large", "nanoclaw gateway: "+err.Error())
		return
	}
	body, _ := io.ReadAll(req.Body)
	if !r.cfg.RelayOnly {
		if body, ok = r.modelOnly(w, req, body); !ok {
			return
		}
	}
	r.send(w, req, real, body)
}

// refuseRelay answers in the Messages API's error shape, which the SDK
// shows the agent, and reports the attempt.
func (r *Gateway) refuseRelay(w http.ResponseWriter, req *http.Request, target string, status int, kind, why string) {
	detail := target + " refused by the model-API relay: " + why
	r.report(req.Context(), target, detail, "relay")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": "nanoclaw sandbox: " + detail}})
}

// keepHeaders drops every header not on the allow-list.
func keepHeaders(h http.Header) {
	for k := range h {
		if relayHeaders[k] || hasPrefix(k, relayHeaderPrefixes) {
			continue
		}
		delete(h, k)
	}
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

var upstreamTransport = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true,
	MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}

// credential finds this run's placeholder in the request's credential
// headers and returns the real value it stands for.
func (r *Gateway) credential(h http.Header) (string, bool) {
	select {
	case <-r.closed:
		return "", false
	default:
	}
	if r.cfg.RelayOnly && len(r.placeholders) == 0 {
		// An unconfined run the daemon has no credential for holds its
		// own (the CLI's login): it passes as it is.
		return "", true
	}
	for _, v := range []string{h.Get("X-Api-Key"), strings.TrimPrefix(h.Get("Authorization"), "Bearer ")} {
		// real is "" for a keyless run's placeholder: no credential goes on.
		if real, ok := r.placeholders[v]; ok && v != "" {
			return real, true
		}
	}
	return "", false
}

// swap puts the real credential where the placeholder was.
func swap(h http.Header, real string) {
	if h.Get("X-Api-Key") != "" {
		h.Set("X-Api-Key", real)
	}
	if strings.HasPrefix(h.Get("Authorization"), "Bearer ") {
		h.Set("Authorization", "Bearer "+real)
	}
}
