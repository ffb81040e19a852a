// Package console is the owner's console: a few pages the daemon serves
// on console.listen that show the whole install (groups, spend, channels,
// the audit trail) and act on it through the same code as the owner's
// chat commands, plus /metrics for Prometheus. Everything it serves is in
// the binary; nothing in a request makes the daemon or the page connect
// anywhere else. auth.go says who may see it.
package console

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/nanoclawd/nanoclawd/internal/config"
	"github.com/nanoclawd/nanoclawd/internal/groups"
	"github.com/nanoclawd/nanoclawd/internal/messages"
	"github.com/nanoclawd/nanoclawd/internal/outbox"
	"github.com/nanoclawd/nanoclawd/internal/scheduler"
	"github.com/nanoclawd/nanoclawd/internal/selftest"
	"github.com/nanoclawd/nanoclawd/internal/status"
	"github.com/nanoclawd/nanoclawd/internal/store"
	"github.com/nanoclawd/nanoclawd/internal/usage"
)

// Actions are what the console's buttons do, each through the code the
// same action takes elsewhere: Owner runs an owner's chat command
// ("/pause family", "/allow K7P", "/undo"), ResetSession is
// `groups reset-session`, Task runs ("run"), pauses or resumes a task.
// Each returns the answer the owner is shown.
type Actions interface {
	Owner(ctx context.Context, command string) (string, error)
	ResetSession(ctx context.Context, folder string) (string, error)
	Task(ctx context.Context, id, op string) (string, error)
}

// Options are what the console reads and drives.
type Options struct {
	Config   func() *config.Config
	Log      zerolog.Logger
	DB       *store.DB
	Status   func(context.Context) (status.Report, error)
	Groups   *groups.Registry
	Messages *messages.Store
	Outbox   *outbox.Outbox
	Usage    *usage.Store
	Tasks    *scheduler.Scheduler
	Proof    *selftest.Verdict
	Actions  Actions
	Metrics  http.Handler // GET /metrics; it checks its own bearer token
	// EventsEvery is how often /events looks for news (default 1 s).
	EventsEvery time.Duration
}

// Server is the console of one daemon.
type Server struct {
	o       Options
	auth    *auth
	hub     *hub
	origin  string // scheme://host:port the owner's browser uses, set by Listen
	address string // scheme://ip:port of the bound socket
	port    string // the bound port
	tls     bool
	named   bool // origin's host is Name, the bound address a loopback one
}

// Name is the console's own host name on loopback. Browsers resolve every
// name under .localhost to the loopback address without asking DNS, and a
// host-only cookie of this name reaches no server on another port of
// 127.0.0.1 (cookies ignore ports, not names).
const Name = "nanoclawd.localhost"

// New is the console over o; Listen binds it, Serve serves it.
func New(o Options) *Server {
	if o.EventsEvery <= 0 {
		o.EventsEvery = time.Second
	}
	return &Server{o: o, auth: newAuth(), hub: newHub()}
}

// Listen binds console.listen. A port already taken is an error the
// daemon logs and runs on without the console.
func (s *Server) Listen(c config.Console) (net.Listener, error) {
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("console: listen on %s: %w (set console.listen to a free port, or console.enabled to false)", c.Listen, err)
	}
	scheme := "http"
	if c.TLS.Cert != "" {
		cert, err := tls.LoadX509KeyPair(c.TLS.Cert, c.TLS.Key)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("console: console.tls %s, %s: %w", c.TLS.Cert, c.TLS.Key, err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme, s.tls = "https", true
	}
	addr := ln.Addr().(*net.TCPAddr)
	host := addr.IP.String()
	if addr.IP.IsUnspecified() {
		host = "127.0.0.1" // the login URL is opened on this machine
	}
	s.port = fmt.Sprint(addr.Port)
	s.address = scheme + "://" + net.JoinHostPort(host, s.port)
	s.origin = s.address
	if !s.tls && (addr.IP.Equal(net.IPv4(127, 0, 0, 1)) || addr.IP.Equal(net.IPv6loopback)) {
		s.origin, s.named = scheme+"://"+net.JoinHostPort(Name, s.port), true
	}
	return ln, nil
}

// Origin is the console's own origin, e.g. http://nanoclawd.localhost:7457.
func (s *Server) Origin() string { return s.origin }

// Address is where the console listens, e.g. http://127.0.0.1:7457: what
// status shows and Prometheus scrapes (its pages go on to Origin).
func (s *Server) Address() string { return s.address }

// Serve answers on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go s.watch(ctx)
	go func() {
		<-ctx.Done()
		srv.Close()
		s.auth.dropAll() // no login page outlives the console
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Handler is every route: /login and /metrics guard themselves, all else
// needs a session, and a POST also the console's Origin and CSRF token.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", s.login)
	mux.HandleFunc("POST /login", s.login)
	if s.o.Metrics != nil {
		mux.Handle("GET /metrics", s.o.Metrics)
	} else {
		mux.HandleFunc("GET /metrics", http.NotFound)
	}
	page := func(h http.HandlerFunc) http.Handler { return s.session(h) }
	mux.Handle("GET /{$}", page(s.overview))
	mux.Handle("GET /groups/{folder}", page(s.groupPage))
	mux.Handle("GET /usage", page(s.usagePage))
	mux.Handle("GET /violations", page(s.violationsPage))
	mux.Handle("GET /events", page(s.events))
	mux.Handle("GET /assets/{name}", page(s.asset))
	post := func(h http.HandlerFunc) http.Handler { return s.session(s.sameOrigin(h)) }
	mux.Handle("POST /api/groups/{folder}/{action}", post(s.groupAction))
	mux.Handle("POST /api/allow", post(s.allow))
	mux.Handle("POST /api/undo", post(s.undo))
	mux.Handle("POST /api/tasks/{id}/{op}", post(s.taskAction))
	mux.Handle("POST /logout", post(s.logout))
	return s.headers(mux)
}

// headers are on every answer: a policy that lets a page load only what
// this server serves, run no inline script or style, and be framed by no
// one; a referrer only to the console itself, so a login URL never
// leaves in one (with none at all, a browser sends a form's POST with
// Origin: null, and the console could not tell its own forms).
func (s *Server) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "+
			"frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		switch s.host(r.Host) {
		case ours:
		case loopbackAddress:
			// The console's port under a loopback address: /metrics is
			// served (Prometheus scrapes 127.0.0.1), a page is sent to
			// the console's name, where its cookie lives; nothing else.
			switch {
			case r.URL.Path == "/metrics":
			case r.Method == http.MethodGet || r.Method == http.MethodHead:
				http.Redirect(w, r, s.origin+r.URL.RequestURI(), http.StatusTemporaryRedirect)
				return
			default:
				plain(w, http.StatusMisdirectedRequest, "This console answers at "+s.origin+".")
				return
			}
		default:
			// Another name that resolves here (DNS rebinding) is not us.
			plain(w, http.StatusMisdirectedRequest, "This console answers only at "+s.origin+".")
			return
		}
		next.ServeHTTP(w, r)
	})
}

type hostKind int

const (
	other hostKind = iota
	ours
	loopbackAddress
)

// host sorts a request's Host: the console's own (its name on loopback;
// any name with TLS, as the certificate decides who the server is), a
// loopback address or "localhost" with the console's port, or another.
func (s *Server) host(hostport string) hostKind {
	if s.o.Config == nil || !s.o.Config().Console.Loopback() {
		return ours
	}
	h, port, err := net.SplitHostPort(hostport)
	if err != nil || port != s.port {
		return other
	}
	ip := net.ParseIP(h)
	loopback := h == "localhost" || (ip != nil && ip.IsLoopback())
	switch {
	case s.named && strings.EqualFold(h, Name):
		return ours
	case s.named && loopback:
		return loopbackAddress
	case !s.named && loopback:
		return ours
	}
	return other
}
