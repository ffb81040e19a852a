package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Who may see the console: whoever opened a login URL that
// `nanoclawd console` printed (it asks the daemon over the control socket,
// which only the daemon's user can reach). The URL's token works once and
// for TokenTTL; it becomes a session cookie (HttpOnly: no script reads it;
// SameSite=Strict: no other site's page sends it). Sessions live in memory,
// so a restart asks for a new login.
const (
	TokenTTL    = 10 * time.Minute
	SessionTTL  = 24 * time.Hour
	cookieName  = "nanoclawd_session"
	maxFailures = 10 // failed logins a minute; more are refused unread
)

type session struct {
	csrf    string
	expires time.Time
}

type auth struct {
	mu       sync.Mutex
	tokens   map[string]time.Time // login token → expiry
	sessions map[string]session   // cookie value → session
	failures []time.Time          // failed logins of the last minute
}

func newAuth() *auth {
	return &auth{tokens: map[string]time.Time{}, sessions: map[string]session{}}
}

func random() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (a *auth) newToken(now time.Time) string {
	t := random()
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, exp := range a.tokens {
		if now.After(exp) {
			delete(a.tokens, k)
		}
	}
	a.tokens[t] = now.Add(TokenTTL)
	return t
}

// redeem trades a login token for a new session, once. limited is true
// when the failures of the last minute are used up: the token is not even
// looked at.
func (a *auth) redeem(token string, now time.Time) (id string, s session, ok, limited bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	recent := a.failures[:0]
	for _, t := range a.failures {
		if now.Sub(t) < time.Minute {
			recent = append(recent, t)
		}
	}
	a.failures = recent
	if len(a.failures) >= maxFailures {
		return "", s, false, true
	}
	exp, found := a.tokens[token]
	if !found || now.After(exp) {
		a.failures = append(a.failures, now)
		return "", s, false, false
	}
	delete(a.tokens, token)
	for k, old := range a.sessions {
		if now.After(old.expires) {
			delete(a.sessions, k)
		}
	}
	id, s = random(), session{csrf: random(), expires: now.Add(SessionTTL)}
	a.sessions[id] = s
	return id, s, true, false
}

func (a *auth) lookup(id string, now time.Time) (session, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if !ok || now.After(s.expires) {
		return session{}, false
	}
	return s, true
}

// login is GET /login?token=…: a good token sets the session cookie and
// goes to the overview; anything else shows nothing of the install.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	id, _, ok, limited := s.auth.redeem(r.URL.Query().Get("token"), time.Now())
	switch {
	case limited:
		s.o.Log.Warn().Str("from", r.RemoteAddr).Msg("console: too many failed logins this minute; refusing more")
		plain(w, http.StatusTooManyRequests, "Too many failed logins this minute. Wait, then run 'nanoclawd console' for a new URL.")
		return
	case !ok:
		plain(w, http.StatusForbidden, "This login URL is used, expired or wrong. Run 'nanoclawd console' on the daemon's machine for a new one.")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, Secure: s.tls,
		SameSite: http.SameSiteStrictMode, MaxAge: int(SessionTTL / time.Second)})
	s.o.Log.Info().Str("from", r.RemoteAddr).Msg("console: the owner logged in")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

type ctxKey struct{}

// session lets a request with a live session cookie through.
func (s *Server) session(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(cookieName)
		if err != nil {
			plain(w, http.StatusUnauthorized, "Not logged in. Run 'nanoclawd console' on the daemon's machine for a login URL.")
			return
		}
		sess, ok := s.auth.lookup(c.Value, time.Now())
		if !ok {
			plain(w, http.StatusUnauthorized, "The session has ended. Run 'nanoclawd console' for a new login URL.")
			return
		}
		next(w, r.WithContext(contextWith(r, sess)))
	})
}

// sameOrigin lets a POST through only from a page of this console: its
// Origin header is ours and it carries the session's CSRF token.
func (s *Server) sameOrigin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		scheme := "http://"
		if s.tls {
			scheme = "https://"
		}
		if origin == "" || (origin != s.origin && origin != scheme+r.Host) {
			plain(w, http.StatusForbidden, "Refused: a change must come from the console's own page (Origin "+s.origin+").")
			return
		}
		sess := sessionOf(r)
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("X-CSRF-Token")), []byte(sess.csrf)) != 1 {
			plain(w, http.StatusForbidden, "Refused: the request has no valid X-CSRF-Token; reload the page.")
			return
		}
		next(w, r)
	}
}

func plain(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	w.Write([]byte(text + "\n"))
}
