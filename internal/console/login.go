package console

import (
	"crypto/subtle"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Login makes a new one-time login token and returns its URL. With page,
// it also writes a private HTML file (mode 0600 in a directory of its own)
// that opens the URL, for a browser `nanoclawd console` starts: the token
// is then on no command line. The file is removed when the token is used
// or expires.
func (s *Server) Login(page bool) (url, file string, err error) {
	if !page {
		return s.origin + "/login?token=" + s.auth.newToken(time.Now(), ""), "", nil
	}
	dir, err := os.MkdirTemp("", "nanoclawd-console-")
	if err != nil {
		return "", "", fmt.Errorf("console: a private directory for the login page: %w", err)
	}
	url = s.origin + "/login?token=" + s.auth.newToken(time.Now(), dir)
	file = filepath.Join(dir, "login.html")
	var b []byte
	b = fmt.Appendf(b, "<!doctype html>\n<meta charset=\"utf-8\">\n<meta name=\"referrer\" content=\"no-referrer\">\n"+
		"<meta http-equiv=\"refresh\" content=\"0; url=%s\">\n<title>nanoclawd console</title>\n<a href=\"%[1]s\">Open the nanoclawd console</a>\n",
		template.HTMLEscapeString(url))
	if err := os.WriteFile(file, b, 0o600); err != nil {
		os.RemoveAll(dir)
		return "", "", fmt.Errorf("console: write the login page: %w", err)
	}
	time.AfterFunc(TokenTTL+time.Second, func() { s.auth.sweep(time.Now()) })
	return url, file, nil
}

// navigation sorts a request by what the browser says of it (Fetch
// Metadata; a client that sends none, like curl, counts as typed):
// typed (the address bar, another program, or the console's own page),
// fromElsewhere (a top-level navigation from another site or a file), or
// embedded (an image, a script, a fetch: never a login).
type navKind int

const (
	typed navKind = iota
	fromElsewhere
	embedded
)

func navigation(r *http.Request) navKind {
	h := r.Header
	if m := h.Get("Sec-Fetch-Mode"); m != "" && m != "navigate" {
		return embedded
	}
	if d := h.Get("Sec-Fetch-Dest"); d != "" && d != "document" {
		return embedded
	}
	switch h.Get("Sec-Fetch-Site") {
	case "", "none", "same-origin":
		return typed
	}
	return fromElsewhere
}

// login is GET /login?token=…, and POST /login from the page that asks
// when the URL came from another site or a file. A good token sets the
// session cookie and goes to the overview; anything else shows nothing
// of the install.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	nav := navigation(r)
	tok := r.URL.Query().Get("token")
	if r.Method == http.MethodPost {
		tok = r.PostFormValue("token")
		if !s.ownOrigin(r) {
			nav = embedded
		}
	}
	switch {
	case nav == embedded:
		s.refuse(w, r, now, "Refused: a login URL works only when the browser opens it as a page.")
		return
	case !s.auth.valid(tok, now):
		s.refuse(w, r, now, badToken)
		return
	case nav == fromElsewhere:
		// Opened from a file (as `nanoclawd console` does) or another
		// site's link: the owner says so with one click on this page,
		// whose POST comes from the console itself.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		confirmPage.Execute(w, tok)
		return
	}
	sess, ok := s.auth.redeem(tok, now)
	if !ok {
		s.refuse(w, r, now, badToken)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: sess.id, Path: "/", HttpOnly: true, Secure: s.tls,
		SameSite: http.SameSiteStrictMode, MaxAge: int(SessionTTL / time.Second)})
	s.o.Log.Info().Str("from", r.RemoteAddr).Msg("console: the owner logged in")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

const badToken = "This login URL is used, expired or wrong. Run 'nanoclawd console' on the daemon's machine for a new one."

var confirmPage = template.Must(template.New("confirm").Parse(`<!doctype html>
<meta charset="utf-8"><title>Log in · nanoclawd</title>
<p>This login URL was opened from a file or another site. Log this browser in to the nanoclawd console?</p>
<form method="post" action="/login"><input type="hidden" name="token" value="{{.}}"><button>Log in</button></form>
`))

// refuse answers a refused login: 403 with text, or 429 once the peer
// is past maxFailures this minute (then not logged, so a page that sends
// many cannot fill the log).
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, now time.Time, text string) {
	peer, _, _ := net.SplitHostPort(r.RemoteAddr)
	if s.auth.refused(peer, now) {
		plain(w, http.StatusTooManyRequests, "Too many refused logins from "+peer+" this minute; a valid login URL still works.")
		return
	}
	s.o.Log.Warn().Str("from", r.RemoteAddr).Str("site", r.Header.Get("Sec-Fetch-Site")).Str("dest", r.Header.Get("Sec-Fetch-Dest")).
		Msg("console: a login was refused: " + text)
	plain(w, http.StatusForbidden, text)
}

// logout is POST /logout: the session ends and its cookie is cleared.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	s.auth.end(sessionOf(r).id)
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: "", Path: "/", HttpOnly: true, Secure: s.tls,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	s.o.Log.Info().Str("from", r.RemoteAddr).Msg("console: the owner logged out")
	plain(w, http.StatusOK, "Logged out. Run 'nanoclawd console' for a new login URL.")
}

// cookieName: with TLS the __Host- prefix makes the browser keep the
// cookie to this host (Secure, Path=/, no Domain).
func (s *Server) cookieName() string {
	if s.tls {
		return "__Host-nanoclawd_session"
	}
	return "nanoclawd_session"
}

type ctxKey struct{}

// session lets a request with a live session cookie through.
func (s *Server) session(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(s.cookieName())
		if err != nil {
			plain(w, http.StatusUnauthorized, "Not logged in. Run 'nanoclawd console' on the daemon's machine for a login URL.")
			return
		}
		sess, ok := s.auth.lookup(c.Value, time.Now(), true)
		if !ok {
			plain(w, http.StatusUnauthorized, "The session has ended. Run 'nanoclawd console' for a new login URL.")
			return
		}
		next(w, r.WithContext(contextWith(r, sess)))
	})
}

// sameOrigin lets a POST through only from a page of this console: its
// Origin header is ours and it carries the session's CSRF token (the
// X-CSRF-Token header of the page's script, or the csrf field of a form).
func (s *Server) sameOrigin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.ownOrigin(r) {
			plain(w, http.StatusForbidden, "Refused: a change must come from the console's own page (Origin "+s.origin+").")
			return
		}
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			got = r.PostFormValue("csrf")
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(sessionOf(r).csrf)) != 1 {
			plain(w, http.StatusForbidden, "Refused: the request has no valid X-CSRF-Token; reload the page.")
			return
		}
		next(w, r)
	}
}

// ownOrigin tells whether a request's Origin is the console's own (with
// TLS, any name the certificate serves it under).
func (s *Server) ownOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	scheme := "http://"
	if s.tls {
		scheme = "https://"
	}
	return origin != "" && (origin == s.origin || origin == scheme+r.Host)
}

func plain(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	w.Write([]byte(text + "\n"))
}
