// Package gateway is the only way out of a confined agent run: a Unix
// socket per run, bound into the run's sandbox, serving two things on one
// HTTP listener:
//
//   - a forward proxy (CONNECT and plain HTTP with an absolute URL) that
//     lets a request through only to a domain the group's
//     network.allowedDomains names and deniedDomains does not; each
//     refusal is reported as a network violation;
//   - a relay to the model API (any other request): the agent holds a
//     per-run placeholder credential, the relay swaps in the daemon's real
//     one and streams the upstream's answer back unbuffered.
//
// The agent's own process never holds the real API key or OAuth token.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/security"
	"github.com/rs/zerolog"
)

// Credentials are the environment variables that carry a model-API
// credential. A confined agent gets a placeholder in their place.
var Credentials = []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"}

// DefaultUpstream is the model API when the daemon's ANTHROPIC_BASE_URL is unset.
const DefaultUpstream = "https://api.anthropic.com"

// Reporter records a refused request as a violation of the group.
type Reporter interface {
	Report(ctx context.Context, v security.Violation) error
}

// Config is what one run's gateway applies.
type Config struct {
	Group          string
	AllowedDomains []string
	DeniedDomains  []string
	// Upstream is the model API the relay forwards to.
	Upstream string
	// Secrets maps each credential variable the agent is given to the
	// daemon's real value; Open makes a placeholder for each.
	Secrets  map[string]string
	Reporter Reporter
	Log      zerolog.Logger
	// Meter, if set, is asked before each model request and told about
	// each answer (meter.go).
	Meter Meter
	// RelayOnly serves the relay and no forward proxy (an unconfined
	// run's relay: it is not held to network rules).
	RelayOnly bool
}

// Run is one run's gateway.
type Run struct {
	cfg          Config
	socket       string
	ln           net.Listener
	srv          *http.Server
	upstream     *url.URL
	placeholders map[string]string // placeholder → real value
	env          map[string]string // variable → placeholder
	closed       chan struct{}
	closeOnce    sync.Once
	dial         func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Open starts a gateway for one run on a new Unix socket at socket.
func Open(socket string, cfg Config) (*Run, error) {
	u, err := upstreamURL(cfg.Upstream)
	if err != nil {
		return nil, err
	}
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
	return serve(ln, socket, u, cfg), nil
}

// serve runs a gateway on ln (socket: its path, removed by Close, or "").
func serve(ln net.Listener, socket string, u *url.URL, cfg Config) *Run {
	r := &Run{cfg: cfg, socket: socket, ln: ln, upstream: u, placeholders: map[string]string{}, env: map[string]string{},
		closed: make(chan struct{})}
	for name, real := range cfg.Secrets {
		if real == "" {
			continue
		}
		ph := placeholder(name)
		r.placeholders[ph] = real
		r.env[name] = ph
	}
	d := &net.Dialer{Timeout: 15 * time.Second, ControlContext: r.checkAddr}
	r.dial = d.DialContext
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 30 * time.Second}
	go r.srv.Serve(ln)
	return r
}

// Env is what the agent gets instead of the real credentials: for each
// variable, this run's placeholder.
func (r *Run) Env() map[string]string { return r.env }

// Close stops the gateway: its placeholders are refused from now on and
// open tunnels end.
func (r *Run) Close() error {
	r.closeOnce.Do(func() { close(r.closed) })
	err := r.srv.Close()
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

func (r *Run) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case r.cfg.RelayOnly:
		r.relay(w, req)
	case req.Method == http.MethodConnect:
		r.connect(w, req)
	case req.URL.IsAbs() && !isGateway(req.URL.Host):
		r.forward(w, req)
	default:
		r.relay(w, req)
	}
}

// isGateway tells whether host is the gateway's own address inside the
// sandbox (a client that sends even local requests through its proxy).
func isGateway(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	return h == "127.0.0.1" || h == "localhost" || h == "::1"
}

// refuse answers 403 and reports the attempt, naming the list that refused it.
func (r *Run) refuse(w http.ResponseWriter, req *http.Request, host, why string) {
	rule := "hostSecurity.network.allowedDomains"
	if strings.Contains(why, "deniedDomains") {
		rule = "hostSecurity.network.deniedDomains"
	}
	detail := fmt.Sprintf("%s %s refused by the egress gateway: %s", req.Method, host, why)
	r.cfg.Log.Warn().Str("group", r.cfg.Group).Str("host", host).Msg(detail)
	if r.cfg.Reporter != nil {
		v := security.Violation{Time: time.Now().UTC(), Group: r.cfg.Group, Kind: security.KindNetwork, Tool: "network",
			Target: host, Detail: detail, Action: "blocked", Rule: rule}
		if err := r.cfg.Reporter.Report(context.WithoutCancel(req.Context()), v); err != nil {
			r.cfg.Log.Error().Err(err).Str("group", r.cfg.Group).Msg("report a refused connection")
		}
	}
	http.Error(w, "nanoclaw sandbox: "+detail, http.StatusForbidden)
}

// allowed applies the group's domain lists to host (no port).
func (r *Run) allowed(host string) (bool, string) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, d := range r.cfg.DeniedDomains {
		if Matches(d, host) {
			return false, "listed in network.deniedDomains (" + d + ")"
		}
	}
	for _, d := range r.cfg.AllowedDomains {
		if Matches(d, host) {
			return true, ""
		}
	}
	if len(r.cfg.AllowedDomains) == 0 {
		return false, "network.allowedDomains is empty, so this group has no network"
	}
	return false, "not in network.allowedDomains"
}

// Matches tells whether a domain rule covers host: "*" any host,
// "*.example.com" every subdomain of example.com, else the name itself.
func Matches(rule, host string) bool {
	rule = strings.ToLower(strings.TrimSuffix(rule, "."))
	switch {
	case rule == "*":
		return true
	case strings.HasPrefix(rule, "*."):
		return strings.HasSuffix(host, rule[1:])
	}
	return host == rule
}

// checkAddr refuses to connect a named host to a loopback, link-local or
// unspecified address: an allowed domain must not lead back into the host.
func (r *Run) checkAddr(ctx context.Context, network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.IsLoopback() || ip.IsUnspecified() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		if literal, _ := ctx.Value(literalKey{}).(string); literal != host {
			return fmt.Errorf("%s resolves to %s, an address of this machine", address, host)
		}
	}
	return nil
}

type literalKey struct{}

// dialContext marks a host written as an IP literal, which an operator
// may allow by naming it.
func dialContext(ctx context.Context, host string) context.Context {
	if net.ParseIP(host) != nil {
		return context.WithValue(ctx, literalKey{}, host)
	}
	return ctx
}

func (r *Run) connect(w http.ResponseWriter, req *http.Request) {
	host, port, err := net.SplitHostPort(req.Host)
	if err != nil {
		host, port = req.Host, "443"
	}
	if ok, why := r.allowed(host); !ok {
		r.refuse(w, req, host, why)
		return
	}
	up, err := r.dial(dialContext(req.Context(), host), "tcp", net.JoinHostPort(host, port))
	if err != nil {
		http.Error(w, "nanoclaw gateway: "+err.Error(), http.StatusBadGateway)
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

func (r *Run) forward(w http.ResponseWriter, req *http.Request) {
	host := req.URL.Hostname()
	if ok, why := r.allowed(host); !ok {
		r.refuse(w, req, host, why)
		return
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return r.dial(dialContext(ctx, host), network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	(&httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.Out.Host = pr.In.URL.Host },
		Transport: tr,
	}).ServeHTTP(w, req)
}

// relay forwards a model-API request upstream with the real credential.
func (r *Run) relay(w http.ResponseWriter, req *http.Request) {
	real, ok := r.credential(req.Header)
	if !ok {
		http.Error(w, "nanoclaw gateway: this request carries no credential of a running agent", http.StatusUnauthorized)
		return
	}
	if r.refused(w, req) {
		return
	}
	if err := bufferBody(req); err != nil {
		apiError(w, http.StatusRequestEntityTooLarge, "request_too_large", "nanoclaw gateway: "+err.Error())
		return
	}
	(&httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(r.upstream)
			pr.Out.Host = r.upstream.Host
			if real != "" {
				swap(pr.Out.Header, real)
			}
		},
		Transport:      upstreamTransport,
		FlushInterval:  -1, // stream the model's answer as it comes
		ModifyResponse: r.metered,
	}).ServeHTTP(w, req)
}

var upstreamTransport = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true,
	MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second}

// credential finds this run's placeholder in the request's credential
// headers and returns the real value it stands for.
func (r *Run) credential(h http.Header) (string, bool) {
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
