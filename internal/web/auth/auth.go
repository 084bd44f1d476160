// Package auth owns the console's credentials and request checks: the API
// token, the people's tokens and login links (read through Users), browser
// sessions and their cookies, scopes, the CSRF and Host/Origin checks, and
// the signed one-tap answer links. The console (internal/web) calls it on
// every request. It never reads sessions or acts on agents; it only says
// who asks and whether the request may proceed.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"herd/internal/store"
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
	// CheckTimeout bounds the store's check of a person's credential: a
	// store that does not answer in time refuses it.
	CheckTimeout = 5 * time.Second
)

// Principal is who a request comes from.
type Principal struct {
	// Scope is ScopeRead or ScopeOperate.
	Scope string
	// Who names the client in events: "token" or "browser:<id prefix>",
	// and for a user "NAME (token)" or "NAME (browser:<id prefix>)".
	Who string
	// User is the user's name, "" for the machine's own token and the
	// logins of plain `herd web url`.
	User string
	// CSRF is the browser session's token ("" for a bearer client, which
	// no browser sends by itself).
	CSRF string

	// userSeq is the user's number: a user removed and added again under
	// the name is another, whose predecessor's sessions are refused.
	userSeq int64
}

// CanOperate reports whether p may change anything.
func (p Principal) CanOperate() bool { return p.Scope == ScopeOperate }

// By names who acts in events (data.by): the user, else the login.
func (p Principal) By() string {
	if p.User != "" {
		return p.User
	}
	return p.Who
}

// Users are the console's people, read on every request that carries
// one's credential (internal/users.Manager, over the store). A missing
// user or token is an error wrapping store.ErrNotFound; any other error
// means the credential cannot be checked now, and it is refused.
type Users interface {
	// User returns the user called name.
	User(ctx context.Context, name string) (store.User, error)
	// TokenUser returns the user holding token.
	TokenUser(ctx context.Context, token string) (store.User, error)
}

// ErrUnauthenticated is a request with no credential, or one that is
// wrong, spent, expired or of a user removed since: 401.
var ErrUnauthenticated = errors.New("not logged in")

// ErrUnchecked is a person's credential that cannot be checked now (the
// store is away): refused, 503.
var ErrUnchecked = errors.New("the login cannot be checked now")

// link is one single-use login link.
type link struct {
	scope   string
	next    string
	expires time.Time
	// user and userSeq name the user the link logs in, "" for none.
	user    string
	userSeq int64
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
	// users are the people; nil: only the machine's token and plain
	// login links.
	users Users
	now   func() time.Time

	// mu guards the fields below.
	mu       sync.Mutex
	links    map[string]link
	sessions map[string]session
}

// NewAuth returns the credentials with token as the API token, and the
// people of users (nil: none).
func NewAuth(token string, users Users) *Auth {
	return &Auth{token: token, users: users, now: time.Now, links: map[string]link{}, sessions: map[string]session{}}
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
	return a.mint(link{scope: scope, next: next})
}

// UserLink mints a single-use login link's nonce that logs u in, landing
// on next: with the read scope when u is read-only or scope asks for it.
// The browser session it opens lasts while u does.
func (a *Auth) UserLink(u store.User, scope, next string) string {
	if u.ReadOnly {
		scope = ScopeRead
	}
	return a.mint(link{scope: scope, next: next, user: u.Name, userSeq: u.Seq})
}

// mint records l under a new nonce.
func (a *Auth) mint(l link) string {
	if l.scope != ScopeRead {
		l.scope = ScopeOperate
	}
	l.next = SafeNext(l.next)
	nonce := randomHex(24)
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for k, l := range a.links {
		if now.After(l.expires) {
			delete(a.links, k)
		}
	}
	l.expires = now.Add(LinkTTL)
	a.links[nonce] = l
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
// land. An unknown, spent or expired nonce, or one of a user removed
// since, is ErrUnauthenticated; a user's link that cannot be checked now
// is ErrUnchecked, and is not spent.
func (a *Auth) Login(ctx context.Context, nonce string) (id, next string, err error) {
	a.mu.Lock()
	l, found := a.links[nonce]
	a.mu.Unlock()
	if !found || a.now().After(l.expires) {
		a.spend(nonce)
		return "", "", ErrUnauthenticated
	}
	p := Principal{Scope: l.scope}
	if l.user != "" {
		u, err := a.user(ctx, l.user, l.userSeq)
		if errors.Is(err, ErrUnauthenticated) {
			a.spend(nonce)
		}
		if err != nil {
			return "", "", err
		}
		if u.ReadOnly {
			p.Scope = ScopeRead
		}
		p.User, p.userSeq = u.Name, u.Seq
	}
	if !a.spend(nonce) {
		return "", "", ErrUnauthenticated // spent meanwhile
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for k, s := range a.sessions {
		if now.After(s.expires) {
			delete(a.sessions, k)
		}
	}
	id = randomHex(32)
	p.Who, p.CSRF = "browser:"+id[:8], randomHex(32)
	if p.User != "" {
		p.Who = p.User + " (" + p.Who + ")"
	}
	a.sessions[id] = session{Principal: p, expires: now.Add(SessionTTL)}
	return id, l.next, nil
}

// spend forgets a link's nonce and reports whether it was there.
func (a *Auth) spend(nonce string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, found := a.links[nonce]
	delete(a.links, nonce)
	return found
}

// user returns the user called name while it is the user numbered seq:
// ErrUnauthenticated once removed (or removed and added again),
// ErrUnchecked when the store cannot say.
func (a *Auth) user(ctx context.Context, name string, seq int64) (store.User, error) {
	if a.users == nil {
		return store.User{}, ErrUnauthenticated
	}
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	u, err := a.users.User(ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.User{}, ErrUnauthenticated
	case err != nil:
		return store.User{}, fmt.Errorf("%w: %w", ErrUnchecked, err)
	case u.Seq != seq:
		return store.User{}, ErrUnauthenticated
	}
	return u, nil
}

// Authenticate returns who r comes from: the machine's bearer token, a
// user's, or a browser session cookie. A user's credential is good while
// the user is (read on every request, so a removed user's next request is
// refused), with the read scope while the user is read-only. The error is
// ErrUnauthenticated, or ErrUnchecked for a person's credential the store
// cannot confirm now.
func (a *Auth) Authenticate(r *http.Request) (Principal, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, found := strings.CutPrefix(h, "Bearer ")
		if !found || tok == "" {
			return Principal{}, ErrUnauthenticated
		}
		if a.token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a.token)) == 1 {
			return Principal{Scope: ScopeOperate, Who: "token"}, nil
		}
		if a.users == nil {
			return Principal{}, ErrUnauthenticated
		}
		ctx, cancel := context.WithTimeout(r.Context(), CheckTimeout)
		defer cancel()
		u, err := a.users.TokenUser(ctx, tok)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return Principal{}, ErrUnauthenticated
		case err != nil:
			return Principal{}, fmt.Errorf("%w: %w", ErrUnchecked, err)
		}
		p := Principal{Scope: ScopeOperate, Who: u.Name + " (token)", User: u.Name, userSeq: u.Seq}
		if u.ReadOnly {
			p.Scope = ScopeRead
		}
		return p, nil
	}
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return Principal{}, ErrUnauthenticated
	}
	a.mu.Lock()
	s, found := a.sessions[c.Value]
	a.mu.Unlock()
	if !found || a.now().After(s.expires) {
		return Principal{}, ErrUnauthenticated
	}
	p := s.Principal
	if p.User == "" {
		return p, nil
	}
	u, err := a.user(r.Context(), p.User, p.userSeq)
	if errors.Is(err, ErrUnauthenticated) {
		a.mu.Lock()
		delete(a.sessions, c.Value)
		a.mu.Unlock()
	}
	if err != nil {
		return Principal{}, err
	}
	if u.ReadOnly {
		p.Scope = ScopeRead
	}
	return p, nil
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
