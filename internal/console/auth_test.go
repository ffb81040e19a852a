package console

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
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
// what login, sessions and the API's guards need (and a /metrics that
// says it was reached).
func serve(t *testing.T, a Actions) *Server {
	t.Helper()
	cfg := config.Default()
	cfg.Console.Listen = "127.0.0.1:0"
	s := New(Options{Config: func() *config.Config { return &cfg }, Actions: a,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics") })})
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

// client is a browser-like client: a cookie jar, no redirects followed,
// and names under .localhost dialled on loopback as browsers do (Go's
// resolver asks DNS for them).
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if h, port, _ := net.SplitHostPort(addr); strings.HasSuffix(h, ".localhost") {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}
}

// get sends a GET with headers h and returns the answer, its body read.
func get(t *testing.T, c *http.Client, u string, h map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// What a browser sends for a URL typed in the address bar, and for an
// <img> on another site's page.
var (
	typedNav = map[string]string{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
	imgHit   = map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}
)

func TestLoginTokenWorksOnce(t *testing.T) {
	s := serve(t, nil)
	login, _, _ := s.Login(false)
	if !strings.HasPrefix(login, "http://"+Name+":") {
		t.Fatalf("login URL %q is not on the console's own name", login)
	}
	c := client(t)
	resp, _ := get(t, c, login, typedNav)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("first use: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Host-only (no Domain), the whole site, HttpOnly, SameSite=Strict.
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"nanoclawd_session=", "Path=/", "HttpOnly", "SameSite=Strict", "Max-Age=43200"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %s", set, want)
		}
	}
	if strings.Contains(strings.ToLower(set), "domain") {
		t.Errorf("Set-Cookie %q names a domain: the cookie would reach other hosts", set)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if resp, _ := get(t, client(t), login, typedNav); resp.StatusCode != http.StatusForbidden {
		t.Errorf("second use: %d, want 403", resp.StatusCode)
	}
}

func TestLoginTokenExpires(t *testing.T) {
	a := newAuth()
	now := time.Now()
	tok := a.newToken(now, "")
	if _, ok := a.redeem(tok, now.Add(TokenTTL+time.Second)); ok {
		t.Error("a token past its 10 minutes was taken")
	}
}

// A session ends 12 hours after login however busy, or after an hour
// without a request; the event stream's looks do not keep it alive.
func TestSessionEnds(t *testing.T) {
	a := newAuth()
	now := time.Now()
	busy, _ := a.redeem(a.newToken(now, ""), now)
	idle, _ := a.redeem(a.newToken(now, ""), now)
	for at := now; at.Before(now.Add(SessionTTL)); at = at.Add(30 * time.Minute) {
		if _, ok := a.lookup(busy.id, at, true); !ok {
			t.Fatalf("a session used every 30 minutes ended after %v", at.Sub(now))
		}
	}
	if _, ok := a.lookup(busy.id, now.Add(SessionTTL), true); ok {
		t.Error("a session outlived its 12 hours")
	}
	if _, ok := a.lookup(idle.id, now.Add(SessionIdle-time.Minute), false); !ok {
		t.Error("a session ended before its idle hour")
	}
	if _, ok := a.lookup(idle.id, now.Add(SessionIdle), false); ok {
		t.Error("a session outlived an hour without a request")
	}
}

// Refused logins from one peer are answered 429 past the limit, and a
// valid token is still let in.
func TestRefusedLoginsNeverLockOutAValidToken(t *testing.T) {
	s := serve(t, nil)
	c := client(t)
	var codes []int
	for range 20 {
		resp, _ := get(t, c, s.Origin()+"/login?token=guess", imgHit)
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != http.StatusForbidden || codes[19] != http.StatusTooManyRequests {
		t.Errorf("20 refused logins answered %v, want 403 then 429", codes)
	}
	login, _, _ := s.Login(false)
	if resp, _ := get(t, c, login, typedNav); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a fresh login URL after 20 refusals: %d, want 303", resp.StatusCode)
	}
}

// Only a page the browser opens logs in. An <img> or a fetch of a valid
// URL is refused and leaves the token unused; a navigation from another
// site or a file gets a page whose button logs in from the console's
// own origin.
func TestLoginOnlyAsANavigation(t *testing.T) {
	s := serve(t, nil)
	login, _, _ := s.Login(false)
	c := client(t)
	for _, h := range []map[string]string{imgHit, {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"},
		{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}} {
		if resp, body := get(t, c, login, h); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Set-Cookie") != "" {
			t.Errorf("login with %v: %d %q", h, resp.StatusCode, body)
		}
	}
	resp, body := get(t, c, login, map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<form method="post" action="/login">`) || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("a navigation from elsewhere: %d %q", resp.StatusCode, body)
	}
	tok := url.Values{"token": {strings.TrimPrefix(login, s.Origin()+"/login?token=")}}
	post := func(origin string) *http.Response {
		req, _ := http.NewRequest("POST", s.Origin()+"/login", strings.NewReader(tok.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post("null"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the login form posted from a file (Origin null): %d, want 403", resp.StatusCode)
	}
	if resp := post(s.Origin()); resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Set-Cookie"), "nanoclawd_session=") {
		t.Errorf("the login form posted from the console: %d %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
}

// On a loopback address of the console's port, /metrics answers and a
// page (the login too) is sent to the console's name without a cookie;
// a POST is refused.
func TestLoopbackAddressGoesToTheName(t *testing.T) {
	s := serve(t, nil)
	login, _, _ := s.Login(false)
	byAddr := strings.Replace(login, Name, "127.0.0.1", 1)
	c := client(t)
	resp, _ := get(t, c, byAddr, typedNav)
	if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != login || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("login on 127.0.0.1: %d to %q, cookie %q", resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Set-Cookie"))
	}
	if resp, body := get(t, c, strings.Replace(s.Origin(), Name, "localhost", 1)+"/metrics", nil); resp.StatusCode != 200 || body != "metrics" {
		t.Errorf("/metrics on localhost: %d %q", resp.StatusCode, body)
	}
	resp, err := c.Post(strings.Replace(s.Origin(), Name, "127.0.0.1", 1)+"/api/undo", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("POST on 127.0.0.1: %d, want 421", resp.StatusCode)
	}
	// The token was not used on the way: it still logs in at the name.
	if resp, _ := get(t, c, login, typedNav); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the login URL after its redirect: %d", resp.StatusCode)
	}
}

// loggedIn is a client with a session on s, and the session's CSRF token.
func loggedIn(t *testing.T, s *Server) (*http.Client, string) {
	t.Helper()
	c := client(t)
	login, _, _ := s.Login(false)
	if resp, _ := get(t, c, login, typedNav); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	u, _ := url.Parse(s.Origin())
	for _, ck := range c.Jar.Cookies(u) {
		if sess, ok := s.auth.lookup(ck.Value, time.Now(), false); ok {
			return c, sess.csrf
		}
	}
	t.Fatal("no session cookie")
	return nil, ""
}

func TestLogoutEndsTheSession(t *testing.T) {
	s := serve(t, nil)
	c, csrf := loggedIn(t, s)
	page := s.Origin() + "/assets/console.css"
	if resp, _ := get(t, c, page, nil); resp.StatusCode != 200 {
		t.Fatalf("logged in: %d", resp.StatusCode)
	}
	logout := func(form url.Values) int {
		req, _ := http.NewRequest("POST", s.Origin()+"/logout", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", s.Origin())
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := logout(url.Values{"csrf": {"wrong"}}); code != http.StatusForbidden {
		t.Errorf("logout with a wrong CSRF token: %d", code)
	}
	if code := logout(url.Values{"csrf": {csrf}}); code != 200 {
		t.Errorf("logout: %d", code)
	}
	if resp, _ := get(t, c, page, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after logout: %d, want 401", resp.StatusCode)
	}
}

// The page `nanoclawd console` opens is private to the owner and gone
// once its token is used.
func TestLoginPageIsPrivateAndRemoved(t *testing.T) {
	s := serve(t, nil)
	login, file, err := s.Login(true)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("page %s: %v %v", file, fi, err)
	}
	if di, err := os.Stat(filepath.Dir(file)); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("page dir: %v %v", di, err)
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), `content="0; url=`+login+`"`) {
		t.Errorf("the page does not open %s:\n%s", login, b)
	}
	if resp, _ := get(t, client(t), login, typedNav); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	if _, err := os.Stat(filepath.Dir(file)); !os.IsNotExist(err) {
		t.Errorf("the page is still there after its login: %v", err)
	}
	_, unused, _ := s.Login(true)
	s.auth.dropAll()
	if _, err := os.Stat(unused); !os.IsNotExist(err) {
		t.Errorf("an unused page outlived the console: %v", err)
	}
}

func TestPostNeedsOriginAndCSRF(t *testing.T) {
	var got []string
	s := serve(t, actions{owner: func(c string) (string, error) { got = append(got, c); return "done", nil }})
	c, csrf := loggedIn(t, s)
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

// A name other than the console's (DNS rebinding) gets nothing.
func TestOnlyTheConsolesNames(t *testing.T) {
	s := serve(t, nil)
	login, _, _ := s.Login(false)
	for _, host := range []string{"evil.example", "evil.localhost", Name + ".evil.example"} {
		req, _ := http.NewRequest("GET", login, nil)
		req.Host = host + ":" + s.port
		resp, err := client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host %s: %d, want 421", host, resp.StatusCode)
		}
	}
}
