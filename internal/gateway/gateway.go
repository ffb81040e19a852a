// Package gateway is the only way out of a confined agent run: a Unix
// socket per run, bound into the run's sandbox, serving two things on one
// HTTP listener:
//
//   - a forward proxy (CONNECT and plain HTTP with an absolute URL) that
//     lets a request through only to a domain the group's
//     network.allowedDomains names and deniedDomains does not, on ports
//     443 and 80 unless a port is written, and never to an address that
//     leads back into the host or its networks unless that address is
//     written (dest.go);
//   - a relay to the model API (a request for the gateway itself): only
//     the Messages API's paths, with an allow-list of headers; the agent
//     holds a per-run placeholder credential, the relay swaps in the
//     daemon's real one (or the provider's own) and streams the upstream's
//     answer back unbuffered (relay.go); it sends each request to the
//     group's provider and model, fails over to the next upstream before
//     the answer began, bounds a silent one (failover.go, route.go), and
//     keeps the API's own network reach from a confined group
//     (servertools.go, fence.go); it meters each answer as the upstream
//     sent it, decoded should it come compressed (meter.go, decode.go).
//
// Every refusal is reported as a network violation. The agent's own
// process never holds the real API key or OAuth token.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/rs/zerolog"
)

// Credentials are the environment variables that carry a model-API
// credential. A confined agent gets a placeholder in their place.
var Credentials = security.ModelCredentials

// KeylessVar is the credential variable an agent is given when its
// providers need none of the daemon's.
const KeylessVar = "ANTHROPIC_API_KEY"

// DefaultUpstream is the model API when the daemon's ANTHROPIC_BASE_URL is unset.
const DefaultUpstream = "https://api.anthropic.com"

// Config is what one run's gateway applies.
type Config struct {
	Group          string
	AllowedDomains []string
	DeniedDomains  []string
	// Upstream is the built-in provider's model API (the daemon's
	// ANTHROPIC_BASE_URL).
	Upstream string
	// Route is where the relay sends model requests, with fallbacks; an
	// empty one is the built-in provider at Upstream, as the agent asks.
	Route Route
	// Routes, if set, is asked for the route of each request instead (a
	// model the owner sets during a run applies to its next request).
	Routes func() Route
	// Tools is the group's tool list: a server tool, mcp_servers or a beta
	// that enables them reaches the API for a confined group only when
	// named here (servertools.go).
	Tools []string
	// Secrets maps each credential variable the agent is given to the
	// daemon's real value; Open makes a placeholder for each.
	Secrets map[string]string
	// Self is the gateway's address as the run sees it (sandbox.Plan's
	// Listen): a proxy request for exactly this address is for the relay.
	Self     string
	Reporter security.Reporter
	Log      zerolog.Logger
	// Meter, if set, is asked before each model request and told about
	// each answer (meter.go).
	Meter Meter
	// Unanswered, if set, is sent the relay's error, once, when the run's
	// model requests found no upstream that answers (outage.go): the
	// run's owner ends the attempt. A buffer of one is enough.
	Unanswered chan<- string
	// RelayOnly serves the relay and no forward proxy (an unconfined
	// run's relay: it is not held to network rules).
	RelayOnly bool
	// Lookup resolves a name (default: the system resolver); tests put a
	// resolver of their own here so no name must really lead anywhere.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Gateway is one run's gateway.
type Gateway struct {
	cfg          Config
	socket       string
	ln           net.Listener
	srv          *http.Server
	placeholders map[string]string // placeholder → real value
	env          map[string]string // variable → placeholder
	closed       chan struct{}
	closeOnce    sync.Once
	outage       outage
	// serving is held (read) by every request being served: what one
	// records (usage, refusals) goes to SQLite, so Close waits for them.
	serving sync.RWMutex
	dialer  *net.Dialer
	lookup  func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Listen makes the Unix socket at socket for a gateway (Serve), which
// may be some time before the run it is for.
func Listen(socket string) (net.Listener, error) {
	os.Remove(socket)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("gateway socket %s: %w", socket, err)
	}
	// The sandbox's user maps to the daemon's own uid outside, so 0600 lets
	// the run in and nobody else.
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve starts a gateway for one run on ln, the Unix socket at socket
// (Listen); on an error ln is closed.
func Serve(ln net.Listener, socket string, cfg Config) (*Gateway, error) {
	u, err := upstreamURL(cfg.Upstream)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return serve(ln, socket, u, cfg), nil
}

// serve runs a gateway on ln (socket: its path, removed by Close, or "").
func serve(ln net.Listener, socket string, u *url.URL, cfg Config) *Gateway {
	if len(cfg.Route.Targets) == 0 {
		cfg.Route.Targets = []Target{{Provider: BuiltinProvider, URL: u.String(), Builtin: true}}
	}
	r := &Gateway{cfg: cfg, socket: socket, ln: ln, placeholders: map[string]string{}, env: map[string]string{},
		closed: make(chan struct{}), outage: outage{tell: cfg.Unanswered}}
	for name, real := range cfg.Secrets {
		if real == "" {
			continue
		}
		ph := placeholder(name)
		r.placeholders[ph] = real
		r.env[name] = ph
	}
	if len(r.env) == 0 && !cfg.Route.usesOwn() {
		// Every upstream takes its provider's credential, or none (a local
		// model server): the daemon needs no key of its own, but the SDK
		// sends nothing without one. The agent gets a placeholder that
		// stands for none.
		ph := placeholder(KeylessVar)
		r.placeholders[ph] = ""
		r.env[KeylessVar] = ph
	}
	r.dialer = &net.Dialer{Timeout: 15 * time.Second, ControlContext: r.checkAddr}
	r.lookup = cfg.Lookup
	if r.lookup == nil {
		r.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 30 * time.Second, ErrorLog: errorLog(cfg.Log)}
	go r.srv.Serve(ln)
	return r
}

// Env is what the agent gets instead of the real credentials: for each
// variable, this run's placeholder.
func (r *Gateway) Env() map[string]string { return r.env }

// Close stops the gateway: its placeholders are refused from now on and
// open tunnels end.
func (r *Gateway) Close() error {
	r.closeOnce.Do(func() { close(r.closed) })
	r.outage.close()
	err := r.srv.Close()
	r.serving.Lock() // the requests it cut off have ended and recorded what they did
	r.serving.Unlock()
	if r.socket != "" {
		os.Remove(r.socket)
	}
	return err
}

func placeholder(name string) string {
	b := make([]byte, 16)
	rand.Read(b)
	return "nanoclaw-placeholder-" + strings.ToLower(strings.ReplaceAll(name, "_", "-")) + "-" + hex.EncodeToString(b)
}

func (r *Gateway) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.serving.RLock()
	defer r.serving.RUnlock()
	select {
	case <-r.closed:
		http.Error(w, "nanoclaw gateway: the run has ended", http.StatusServiceUnavailable)
		return
	default:
	}
	switch {
	case r.cfg.RelayOnly:
		r.relay(w, req)
	case req.Method == http.MethodConnect:
		r.connect(w, req)
	case req.URL.IsAbs() && req.URL.Host != r.cfg.Self:
		r.forward(w, req)
	default:
		r.relay(w, req)
	}
}

// refuse answers 403 and reports the attempt with the reason and the
// config key that decided it.
func (r *Gateway) refuse(w http.ResponseWriter, req *http.Request, target string, ref *refusal) {
	detail := fmt.Sprintf("%s %s refused by the egress gateway: %s", req.Method, target, ref.why)
	r.report(req.Context(), target, detail, ref.rule)
	http.Error(w, "nanoclaw sandbox: "+detail, http.StatusForbidden)
}

// report records one refusal as a network violation of the group.
func (r *Gateway) report(ctx context.Context, target, detail, rule string) {
	r.cfg.Log.Warn().Str("group", r.cfg.Group).Str("host", target).Msg(detail)
	if r.cfg.Reporter == nil {
		return
	}
	v := security.Violation{Time: time.Now().UTC(), Group: r.cfg.Group, Kind: security.KindNetwork, Tool: "network",
		Target: target, Detail: detail, Action: "blocked", Rule: rule}
	if err := r.cfg.Reporter.Report(context.WithoutCancel(ctx), v); err != nil {
		r.cfg.Log.Error().Err(err).Str("group", r.cfg.Group).Msg("report a refused connection")
	}
}

// fail answers a connection that could not be made: a refusal (by policy,
// at resolve or at connect) is a 403 and a violation, anything else (no
// such name, the far end refused) a 502.
func (r *Gateway) fail(w http.ResponseWriter, req *http.Request, host string, err error) {
	var ref *refusal
	if errors.As(err, &ref) {
		r.refuse(w, req, host, ref)
		return
	}
	http.Error(w, "nanoclaw gateway: "+err.Error(), http.StatusBadGateway)
}

func (r *Gateway) connect(w http.ResponseWriter, req *http.Request) {
	host, port, err := net.SplitHostPort(req.Host)
	if err != nil {
		host, port = req.Host, "443"
	}
	addrs, err := r.resolve(req.Context(), host, port)
	if err != nil {
		r.fail(w, req, host, err)
		return
	}
	up, err := r.dial(req.Context(), addrs, port)
	if err != nil {
		r.fail(w, req, host, err)
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "no tunnel", http.StatusInternalServerError)
		return
	}
	c, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, buf); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	select {
	case <-done:
	case <-r.closed:
	}
}

// forward proxies a plain-HTTP request with an absolute URL; it connects
// only to the addresses checked for it.
func (r *Gateway) forward(w http.ResponseWriter, req *http.Request) {
	host, port := req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[req.URL.Scheme]
		if port == "" {
			port = "80"
		}
	}
	addrs, err := r.resolve(req.Context(), host, port)
	if err != nil {
		r.fail(w, req, host, err)
		return
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return r.dial(ctx, addrs, port) },
	}
	defer tr.CloseIdleConnections()
	(&httputil.ReverseProxy{
		Rewrite:      func(pr *httputil.ProxyRequest) { pr.Out.Host = pr.In.URL.Host },
		Transport:    tr,
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) { r.fail(w, req, host, err) },
	}).ServeHTTP(w, req)
}
