package auth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"herd/internal/store"
)

func TestLoginLinks(t *testing.T) {
	a := NewAuth("tok", nil)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	ctx := t.Context()

	n := a.Link(ScopeOperate, "/sessions/w-0")
	id, next, err := a.Login(ctx, n)
	if err != nil || id == "" || next != "/sessions/w-0" {
		t.Fatalf("[first use] expected a session landing on /sessions/w-0 … got %q %q %v", id, next, err)
	}
	if _, _, err := a.Login(ctx, n); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("[second use] expected the link spent … got %v", err)
	}
	n = a.Link(ScopeRead, "//evil.example/x")
	now = now.Add(LinkTTL + time.Second)
	if _, _, err := a.Login(ctx, n); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("[expired] expected no login after %s … got %v", LinkTTL, err)
	}
	if _, _, err := a.Login(ctx, "nonsense"); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("[unknown] expected no login … got %v", err)
	}
	now = now.Add(-LinkTTL)
	n = a.Link(ScopeRead, "//evil.example/x")
	_, next, err = a.Login(ctx, n)
	if err != nil || next != "/" {
		t.Errorf("[offsite next] expected a login landing on / … got %q %v", next, err)
	}
}

// fakeUsers is a store of users and token hashes in memory; away makes
// every read fail as a store that cannot be reached.
type fakeUsers struct {
	mu     sync.Mutex
	users  map[string]store.User
	tokens map[string]int64 // token → user seq
	away   bool
}

var errAway = errors.New("store unreachable")

func (f *fakeUsers) User(_ context.Context, name string) (store.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.away {
		return store.User{}, errAway
	}
	u, ok := f.users[name]
	if !ok {
		return store.User{}, &store.NotFoundError{What: "user", Key: name}
	}
	return u, nil
}

func (f *fakeUsers) TokenUser(_ context.Context, token string) (store.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.away {
		return store.User{}, errAway
	}
	seq, ok := f.tokens[token]
	for _, u := range f.users {
		if ok && u.Seq == seq {
			return u, nil
		}
	}
	return store.User{}, store.ErrNotFound
}

func (f *fakeUsers) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func TestAuthenticate(t *testing.T) {
	users := &fakeUsers{
		users: map[string]store.User{
			"alice": {Seq: 1, Name: "alice"},
			"rob":   {Seq: 2, Name: "rob", ReadOnly: true},
			"carol": {Seq: 3, Name: "carol"},
			"dave":  {Seq: 4, Name: "dave"},
		},
		tokens: map[string]int64{"alice-token": 1, "rob-token": 2, "carol-token": 3},
	}
	a := NewAuth("secret-token", users)
	ctx := t.Context()
	login := func(nonce string) string {
		t.Helper()
		id, _, err := a.Login(ctx, nonce)
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		return id
	}
	opID := login(a.Link(ScopeOperate, "/"))
	roID := login(a.Link(ScopeRead, "/"))
	aliceID := login(a.UserLink(users.users["alice"], ScopeOperate, "/"))
	robID := login(a.UserLink(users.users["rob"], ScopeOperate, "/"))
	carolID := login(a.UserLink(users.users["carol"], ScopeOperate, "/"))
	daveID := login(a.UserLink(users.users["dave"], ScopeOperate, "/"))
	aliceRO := login(a.UserLink(users.users["alice"], ScopeRead, "/"))
	// carol is removed; dave removed and added again (another user).
	users.set(func() {
		delete(users.users, "carol")
		users.users["dave"] = store.User{Seq: 5, Name: "dave"}
	})

	for _, c := range []struct {
		name           string
		bearer, cookie string
		err            error
		scope          string
		by             string
		csrf           bool
	}{
		{name: "bearer", bearer: "secret-token", scope: ScopeOperate, by: "token"},
		{name: "wrong bearer", bearer: "secret-tokeN", err: ErrUnauthenticated},
		{name: "empty bearer", bearer: " ", err: ErrUnauthenticated},
		{name: "wrong bearer with a good cookie", bearer: "x", cookie: opID, err: ErrUnauthenticated},
		{name: "operate cookie", cookie: opID, scope: ScopeOperate, csrf: true},
		{name: "read cookie", cookie: roID, scope: ScopeRead, csrf: true},
		{name: "unknown cookie", cookie: "0123", err: ErrUnauthenticated},
		{name: "nothing", err: ErrUnauthenticated},
		{name: "a user's token", bearer: "alice-token", scope: ScopeOperate, by: "alice"},
		{name: "a read-only user's token", bearer: "rob-token", scope: ScopeRead, by: "rob"},
		{name: "a removed user's token", bearer: "carol-token", err: ErrUnauthenticated},
		{name: "a user's cookie", cookie: aliceID, scope: ScopeOperate, by: "alice", csrf: true},
		{name: "a user's read-only link", cookie: aliceRO, scope: ScopeRead, by: "alice", csrf: true},
		{name: "a read-only user's cookie from an operate link", cookie: robID, scope: ScopeRead, by: "rob", csrf: true},
		{name: "a removed user's cookie", cookie: carolID, err: ErrUnauthenticated},
		{name: "a cookie of a user removed and added again", cookie: daveID, err: ErrUnauthenticated},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if c.bearer != "" {
			r.Header.Set("Authorization", "Bearer "+c.bearer)
		}
		if c.cookie != "" {
			r.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
		}
		p, err := a.Authenticate(r)
		if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) || p.Scope != c.scope || (p.CSRF != "") != c.csrf {
			t.Errorf("[%s] expected err=%v scope=%q csrf=%v … got err=%v scope=%q csrf=%v", c.name, c.err, c.scope, c.csrf, err, p.Scope, p.CSRF != "")
		}
		if c.by != "" && p.By() != c.by {
			t.Errorf("[%s] expected by %q … got %q (who %q)", c.name, c.by, p.By(), p.Who)
		}
	}
}

// TestUsersFailClosed: while the users cannot be read, a person's token,
// cookie and login link are refused as unchecked (the link not spent);
// the machine's token and plain logins go on.
func TestUsersFailClosed(t *testing.T) {
	users := &fakeUsers{users: map[string]store.User{"alice": {Seq: 1, Name: "alice"}}, tokens: map[string]int64{"alice-token": 1}}
	a := NewAuth("secret-token", users)
	ctx := t.Context()
	cookie, _, err := a.Login(ctx, a.UserLink(users.users["alice"], ScopeOperate, "/"))
	if err != nil {
		t.Fatal(err)
	}
	plain, _, err := a.Login(ctx, a.Link(ScopeOperate, "/"))
	if err != nil {
		t.Fatal(err)
	}
	link := a.UserLink(users.users["alice"], ScopeOperate, "/")
	users.set(func() { users.away = true })
	for _, c := range []struct {
		name           string
		bearer, cookie string
		err            error
	}{
		{"a user's token", "alice-token", "", ErrUnchecked},
		{"a user's cookie", "", cookie, ErrUnchecked},
		{"the machine's token", "secret-token", "", nil},
		{"a plain login", "", plain, nil},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if c.bearer != "" {
			r.Header.Set("Authorization", "Bearer "+c.bearer)
		}
		if c.cookie != "" {
			r.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
		}
		if _, err := a.Authenticate(r); !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("[%s] expected %v … got %v", c.name, c.err, err)
		}
	}
	if _, _, err := a.Login(ctx, link); !errors.Is(err, ErrUnchecked) {
		t.Errorf("[a user's link] expected unchecked … got %v", err)
	}
	users.set(func() { users.away = false })
	if _, _, err := a.Login(ctx, link); err != nil {
		t.Errorf("[the link once the store is back] expected a login (not spent) … got %v", err)
	}
}

func TestCSRF(t *testing.T) {
	browser := Principal{Scope: ScopeOperate, CSRF: "abc"}
	for _, c := range []struct {
		name   string
		p      Principal
		header string
		want   bool
	}{
		{"browser with its token", browser, "abc", true},
		{"browser without", browser, "", false},
		{"browser with another", browser, "abd", false},
		{"bearer client", Principal{Scope: ScopeOperate}, "", true},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		if c.header != "" {
			r.Header.Set(CSRFHeader, c.header)
		}
		if got := CheckCSRF(c.p, r); got != c.want {
			t.Errorf("[%s] expected %v … got %v", c.name, c.want, got)
		}
	}
}

func TestHostAllowed(t *testing.T) {
	for _, c := range []struct {
		host, listen string
		allow        []string
		want         bool
	}{
		{"127.0.0.1:7780", "127.0.0.1:7780", nil, true},
		{"localhost:7780", "127.0.0.1:7780", nil, true},
		{"LOCALHOST:7780", "127.0.0.1:7780", nil, true},
		{"localhost:7781", "127.0.0.1:7780", nil, false},
		{"evil.example:7780", "127.0.0.1:7780", nil, false}, // DNS rebinding
		{"", "127.0.0.1:7780", nil, false},
		{"herd.lan:7780", "0.0.0.0:7780", []string{"herd.lan"}, true},
		{"herd.lan", "0.0.0.0:443", []string{"herd.lan"}, true},
		{"other.lan:7780", "0.0.0.0:7780", []string{"herd.lan"}, false},
		{"10.0.0.5:7780", "10.0.0.5:7780", nil, true},
	} {
		if got := HostAllowed(c.host, c.listen, c.allow); got != c.want {
			t.Errorf("[host %q listen %q allow %v] expected %v … got %v", c.host, c.listen, c.allow, c.want, got)
		}
	}
}

func TestOriginAllowed(t *testing.T) {
	browser := Principal{CSRF: "x"}
	for _, c := range []struct {
		name   string
		p      Principal
		origin string
		tls    bool
		want   bool
	}{
		{"same origin", browser, "http://127.0.0.1:7780", false, true},
		{"other port", browser, "http://127.0.0.1:9999", false, false},
		{"other scheme", browser, "http://127.0.0.1:7780", true, false},
		{"https same", browser, "https://127.0.0.1:7780", true, true},
		{"behind a tls proxy", browser, "https://127.0.0.1:7780", false, true},
		{"other host", browser, "http://evil.example:7780", false, false},
		{"null", browser, "null", false, false},
		{"browser without origin", browser, "", false, false},
		{"bearer without origin", Principal{}, "", false, true},
	} {
		if got := OriginAllowed(c.p, c.origin, "127.0.0.1:7780", c.tls); got != c.want {
			t.Errorf("[%s] expected %v … got %v", c.name, c.want, got)
		}
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"": "/", "/": "/", "/sessions/w-0": "/sessions/w-0", "//evil.example": "/", "https://evil.example/": "/",
		"/\\evil": "/", "sessions": "/", "/a\r\nSet-Cookie: x": "/",
	} {
		if got := SafeNext(in); got != want {
			t.Errorf("[next %q] expected %q … got %q", in, want, got)
		}
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	tok, err := LoadToken(dir)
	if err != nil || len(tok) != 64 {
		t.Fatalf("[new] expected a 64-hex token … got %q %v", tok, err)
	}
	fi, err := os.Stat(filepath.Join(dir, TokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("[mode] expected 0600 … got %v %v", fi.Mode().Perm(), err)
	}
	again, err := LoadToken(dir)
	if err != nil || again != tok {
		t.Errorf("[again] expected the same token … got %q %v", again, err)
	}
}
