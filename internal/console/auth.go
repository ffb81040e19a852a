package console

import (
	"crypto/rand"
	"encoding/base64"
	"os"
	"sync"
	"time"
)

// Who may see the console: whoever opened a login URL that
// `nanoclawd console` printed (it asks the daemon over the control socket,
// which only the daemon's user can reach). The URL's token works once and
// for TokenTTL; it becomes a session cookie (HttpOnly: no script reads it;
// SameSite=Strict: no other site's page sends it; host-only on the
// console's own name, so no server on another port of 127.0.0.1 gets it).
// A session ends after SessionTTL, after SessionIdle without a request,
// or at logout. Sessions live in memory, so a restart asks for a new login.
const (
	TokenTTL    = 10 * time.Minute
	SessionTTL  = 12 * time.Hour
	SessionIdle = time.Hour
	// maxFailures is how many refused logins a minute one peer gets
	// answered and logged; more are answered 429 unlogged. A valid token
	// is let in whatever the count: tokens are 256 random bits, so the
	// limit keeps a hostile page from filling the log, not from guessing.
	maxFailures = 10
)

type session struct {
	id, csrf      string
	started, seen time.Time
}

// token is a login token not used yet; page is the private directory of
// the page that opens it (Server.Login), removed when the token is used
// or expires.
type token struct {
	expires time.Time
	page    string
}

type auth struct {
	mu       sync.Mutex
	tokens   map[string]token
	sessions map[string]*session
	failures map[string][]time.Time // refused logins of the last minute, per peer address
}

func newAuth() *auth {
	return &auth{tokens: map[string]token{}, sessions: map[string]*session{}, failures: map[string][]time.Time{}}
}

func random() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// newToken makes a login token valid until now+TokenTTL.
func (a *auth) newToken(now time.Time, page string) string {
	t := random()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prune(now)
	a.tokens[t] = token{expires: now.Add(TokenTTL), page: page}
	return t
}

// prune forgets expired tokens (removing their pages) and ended sessions.
func (a *auth) prune(now time.Time) {
	for k, t := range a.tokens {
		if now.After(t.expires) {
			a.dropToken(k)
		}
	}
	for k, s := range a.sessions {
		if !s.live(now) {
			delete(a.sessions, k)
		}
	}
}

func (a *auth) dropToken(k string) {
	if p := a.tokens[k].page; p != "" {
		os.RemoveAll(p)
	}
	delete(a.tokens, k)
}

// sweep forgets what has expired by now.
func (a *auth) sweep(now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prune(now)
}

// dropAll forgets every token and removes its page (the console stops).
func (a *auth) dropAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.tokens {
		a.dropToken(k)
	}
}

// valid tells whether tok is a login token that can still be used.
func (a *auth) valid(tok string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.tokens[tok]
	return ok && !now.After(t.expires)
}

// redeem trades a valid login token for a new session, once.
func (a *auth) redeem(tok string, now time.Time) (session, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prune(now)
	if _, ok := a.tokens[tok]; !ok {
		return session{}, false
	}
	a.dropToken(tok)
	s := &session{id: random(), csrf: random(), started: now, seen: now}
	a.sessions[s.id] = s
	return *s, true
}

// refused counts a refused login from peer and tells whether the peer is
// past its limit this minute.
func (a *auth) refused(peer string, now time.Time) (limited bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for p, ts := range a.failures {
		recent := ts[:0]
		for _, t := range ts {
			if now.Sub(t) < time.Minute {
				recent = append(recent, t)
			}
		}
		if len(recent) == 0 {
			delete(a.failures, p)
		} else {
			a.failures[p] = recent
		}
	}
	a.failures[peer] = append(a.failures[peer], now)
	return len(a.failures[peer]) > maxFailures
}

func (s *session) live(now time.Time) bool {
	return now.Sub(s.started) < SessionTTL && now.Sub(s.seen) < SessionIdle
}

// lookup finds a live session; a request of the owner's (touch) counts as
// activity, the event stream's ticks do not.
func (a *auth) lookup(id string, now time.Time, touch bool) (session, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if !ok || !s.live(now) {
		delete(a.sessions, id)
		return session{}, false
	}
	if touch {
		s.seen = now
	}
	return *s, true
}

// end ends a session (logout).
func (a *auth) end(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, id)
}
