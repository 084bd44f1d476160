// Package auth owns the console's credentials and request checks: the API
// token, login links, browser sessions and their cookies, scopes, the CSRF
// and Host/Origin checks, and the signed one-tap answer links. The console
// (internal/web) calls it on every request. It never reads sessions or acts
// on agents; it only says who asks and whether the request may proceed.
package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Scopes of a console client.
const (
	// ScopeRead sees everything and changes nothing.
	ScopeRead = "read"
	// ScopeOperate may also answer, type into agents and run verbs.
	ScopeOperate = "operate"
)

// Lifetimes of the console's credentials.
const (
	// LinkTTL is how long a login link is valid.
	LinkTTL = 5 * time.Minute
	// SessionTTL is how long a browser stays logged in.
	SessionTTL = 12 * time.Hour
	// CookieName is the browser session cookie.
	CookieName = "herd_console"
	// CSRFHeader carries a browser session's CSRF token on every POST.
	CSRFHeader = "X-Herd-CSRF"
	// TokenFile is the API token's file in the state dir.
	TokenFile = "web.token"
)

// Principal is who a request comes from.
type Principal struct {
	// Scope is ScopeRead or ScopeOperate.
	Scope string
	// Who names the client in events: "token" or "browser:<id prefix>".
	Who string
	// CSRF is the browser session's token ("" for a bearer client, which
	// no browser sends by itself).
	CSRF string
}

// CanOperate reports whether p may change anything.
func (p Principal) CanOperate() bool { return p.Scope == ScopeOperate }

// link is one single-use login link.
type link struct {
	scope   string
	next    string
	expires time.Time
}

// session is one logged-in browser.
type session struct {
	Principal
	expires time.Time
}

// Auth keeps the console's credentials: the API token, the login links
// and the browser sessions. Links and sessions live in memory only: a
// restarted daemon forgets them.
type Auth struct {
	token string
	now   func() time.Time

	// mu guards the fields below.
	mu       sync.Mutex
	links    map[string]link
	sessions map[string]session
}

// NewAuth returns the credentials with token as the API token.
func NewAuth(token string) *Auth {
	return &Auth{token: token, now: time.Now, links: map[string]link{}, sessions: map[string]session{}}
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// SafeNext returns next when it is a path of this site, else "/": a login
// link never redirects elsewhere.
func SafeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return "/"
	}
	return next
}

// Link mints a single-use login link's nonce of scope, landing on next.
func (a *Auth) Link(scope, next string) string {
	if scope != ScopeRead {
		scope = ScopeOperate
	}
	nonce := randomHex(24)
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for k, l := range a.links {
		if now.After(l.expires) {
			delete(a.links, k)
		}
	}
	a.links[nonce] = link{scope: scope, next: SafeNext(next), expires: now.Add(LinkTTL)}
	return nonce
}

// Valid reports whether a link's nonce can log in now, without spending
// it: what a login link's GET (a person's, or a link preview's) may learn.
func (a *Auth) Valid(nonce string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, found := a.links[nonce]
	return found && !a.now().After(l.expires)
}

// Login spends a link's nonce: a new browser session's id and where to
// land. ok is false for an unknown, spent or expired nonce.
func (a *Auth) Login(nonce string) (id, next string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l, found := a.links[nonce]
	if !found {
		return "", "", false
	}
	delete(a.links, nonce)
	now := a.now()
	if now.After(l.expires) {
		return "", "", false
	}
	for k, s := range a.sessions {
		if now.After(s.expires) {
			delete(a.sessions, k)
		}
	}
	id = randomHex(32)
	a.sessions[id] = session{Principal: Principal{Scope: l.scope, Who: "browser:" + id[:8], CSRF: randomHex(32)}, expires: now.Add(SessionTTL)}
	return id, l.next, true
}

// Authenticate returns who r comes from: a bearer token, or a browser
// session cookie. ok is false for neither.
func (a *Auth) Authenticate(r *http.Request) (Principal, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, found := strings.CutPrefix(h, "Bearer ")
		if found && a.token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a.token)) == 1 {
			return Principal{Scope: ScopeOperate, Who: "token"}, true
		}
		return Principal{}, false
	}
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return Principal{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s, found := a.sessions[c.Value]
	if !found || a.now().After(s.expires) {
		return Principal{}, false
	}
	return s.Principal, true
}

// CheckCSRF reports whether a state-changing request of p carries p's
// CSRF token (a bearer client needs none: browsers never send it one).
func CheckCSRF(p Principal, r *http.Request) bool {
	if p.CSRF == "" {
		return true
	}
	got := r.Header.Get(CSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(p.CSRF)) == 1
}

// HostAllowed reports whether a request's Host names the console: the
// address it listens on (with localhost for a loopback one) or one of
// allow. Anything else is a DNS-rebinding attempt or a misdirected
// request.
func HostAllowed(host, listen string, allow []string) bool {
	host = strings.ToLower(host)
	if host == "" {
		return false
	}
	if host == strings.ToLower(listen) {
		return true
	}
	lh, lport, err := net.SplitHostPort(listen)
	if err == nil {
		if ip := net.ParseIP(lh); ip != nil && ip.IsLoopback() {
			if host == "localhost:"+lport || host == net.JoinHostPort("127.0.0.1", lport) || host == net.JoinHostPort("::1", lport) {
				return true
			}
		}
	}
	for _, a := range allow {
		a = strings.ToLower(a)
		if host == a {
			return true
		}
		if h, _, err := net.SplitHostPort(host); err == nil && h == a {
			return true
		}
	}
	return false
}

// OriginAllowed reports whether a POST's Origin is the console itself. A
// browser always sends Origin with a POST; a cookie-authenticated request
// without one is refused, a bearer client's is accepted. An https origin
// of the same host is accepted on plain HTTP too: a TLS proxy in front.
func OriginAllowed(p Principal, origin, host string, tls bool) bool {
	if origin == "" {
		return p.CSRF == ""
	}
	if strings.EqualFold(origin, "https://"+host) {
		return true
	}
	return !tls && strings.EqualFold(origin, "http://"+host)
}
