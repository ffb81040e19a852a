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
	o      Options
	auth   *auth
	origin string // scheme://host:port of the bound address, set by Listen
	port   string // the bound port
	tls    bool
}

// New is the console over o; Listen binds it, Serve serves it.
func New(o Options) *Server {
	if o.EventsEvery <= 0 {
		o.EventsEvery = time.Second
	}
	return &Server{o: o, auth: newAuth()}
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
	s.origin = scheme + "://" + net.JoinHostPort(host, s.port)
	return ln, nil
}

// Origin is the console's own origin, e.g. http://127.0.0.1:7457.
func (s *Server) Origin() string { return s.origin }

// LoginURL makes a new one-time login token and returns its URL.
func (s *Server) LoginURL() string {
	return s.origin + "/login?token=" + s.auth.newToken(time.Now())
}

// Serve answers on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		<-ctx.Done()
		srv.Close()
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
	return s.headers(mux)
}

// headers are on every answer: a policy that lets a page load only what
// this server serves, run no inline script or style, and be framed by no
// one; no referrer, so a login URL never leaves in one.
func (s *Server) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "+
			"frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if !s.hostAllowed(r.Host) {
			// Another name that resolves here (DNS rebinding) is not us.
			http.Error(w, "this console answers only at "+s.origin, http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed: on loopback only the loopback names of our port; elsewhere
// (TLS) any name, as certificates decide who the server is.
func (s *Server) hostAllowed(host string) bool {
	if s.o.Config == nil || !s.o.Config().Console.Loopback() {
		return true
	}
	h, port, err := net.SplitHostPort(host)
	if err != nil {
		return false
	}
	ip := net.ParseIP(h)
	return port == s.port && (h == "localhost" || (ip != nil && ip.IsLoopback()))
}
