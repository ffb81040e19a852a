package console

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nanoclawd/nanoclawd/internal/config"
)

// actions is the console's Actions as func fields.
type actions struct {
	owner func(string) (string, error)
}

func (a actions) Owner(_ context.Context, c string) (string, error)    { return a.owner(c) }
func (a actions) ResetSession(context.Context, string) (string, error) { return "", nil }
func (a actions) Task(context.Context, string, string) (string, error) { return "", nil }

// serve starts the console's handler on a real loopback port, with only
// what login, sessions and the API's guards need.
func serve(t *testing.T, a Actions) *Server {
	t.Helper()
	cfg := config.Default()
	cfg.Console.Listen = "127.0.0.1:0"
	s := New(Options{Config: func() *config.Config { return &cfg }, Actions: a})
	ln, err := s.Listen(cfg.Console)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return s
}

func TestLoginTokenWorksOnce(t *testing.T) {
	s := serve(t, nil)
	url := s.LoginURL()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("first use: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	ck := resp.Cookies()
	if len(ck) != 1 || !ck[0].HttpOnly || ck[0].SameSite != http.SameSiteStrictMode || ck[0].Name != cookieName {
		t.Errorf("session cookie %+v, want HttpOnly and SameSite=Strict", ck)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	resp, err = http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("second use: %d, want 403", resp.StatusCode)
	}
}

func TestLoginTokenExpires(t *testing.T) {
	a := newAuth()
	now := time.Now()
	tok := a.newToken(now)
	if _, _, ok, _ := a.redeem(tok, now.Add(TokenTTL+time.Second)); ok {
		t.Error("a token past its 10 minutes was taken")
	}
}

// Ten failed logins a minute; then even a good token waits for the minute.
func TestFailedLoginsAreLimited(t *testing.T) {
	a := newAuth()
	now := time.Now()
	good := a.newToken(now)
	for i := range maxFailures {
		if _, _, ok, limited := a.redeem("guess", now); ok || limited {
			t.Fatalf("failure %d: ok %v limited %v", i+1, ok, limited)
		}
	}
	if _, _, ok, limited := a.redeem(good, now); ok || !limited {
		t.Errorf("the 11th try within the minute: ok %v limited %v, want limited", ok, limited)
	}
	if _, _, ok, _ := a.redeem(good, now.Add(61*time.Second)); !ok {
		t.Error("a good token was refused a minute after the failures")
	}
}

func TestPostNeedsOriginAndCSRF(t *testing.T) {
	var got []string
	s := serve(t, actions{owner: func(c string) (string, error) { got = append(got, c); return "done", nil }})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(s.LoginURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csrf := sessionCSRF(t, s)
	post := func(h map[string]string) int {
		req, _ := http.NewRequest("POST", s.Origin()+"/api/undo", nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, h := range []map[string]string{{}, {"Origin": s.Origin()}, {"X-CSRF-Token": csrf},
		{"Origin": "http://127.0.0.1:1", "X-CSRF-Token": csrf}, {"Origin": s.Origin(), "X-CSRF-Token": csrf + "x"}} {
		if code := post(h); code != http.StatusForbidden {
			t.Errorf("POST with %v: %d, want 403", h, code)
		}
	}
	if len(got) != 0 {
		t.Fatalf("a refused POST acted: %v", got)
	}
	if code := post(map[string]string{"Origin": s.Origin(), "X-CSRF-Token": csrf}); code != http.StatusOK || len(got) != 1 || got[0] != "/undo" {
		t.Errorf("a good POST: %d, acted %v", code, got)
	}
}

// sessionCSRF is the CSRF token of the one session s has.
func sessionCSRF(t *testing.T, s *Server) string {
	t.Helper()
	s.auth.mu.Lock()
	defer s.auth.mu.Unlock()
	if len(s.auth.sessions) != 1 {
		t.Fatalf("%d sessions", len(s.auth.sessions))
	}
	for _, sess := range s.auth.sessions {
		return sess.csrf
	}
	return ""
}

// A name other than loopback's (DNS rebinding) gets nothing.
func TestOnlyLoopbackNames(t *testing.T) {
	s := serve(t, nil)
	req, _ := http.NewRequest("GET", s.LoginURL(), nil)
	req.Host = "evil.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host evil.example: %d, want 421", resp.StatusCode)
	}
}
