package auth

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestLoginLinks(t *testing.T) {
	a := NewAuth("tok")
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }

	n := a.Link(ScopeOperate, "/sessions/w-0")
	id, next, ok := a.Login(n)
	if !ok || id == "" || next != "/sessions/w-0" {
		t.Fatalf("[first use] expected a session landing on /sessions/w-0 … got %q %q %v", id, next, ok)
	}
	if _, _, ok := a.Login(n); ok {
		t.Errorf("[second use] expected the link spent … got a login")
	}
	n = a.Link(ScopeRead, "//evil.example/x")
	now = now.Add(LinkTTL + time.Second)
	if _, _, ok := a.Login(n); ok {
		t.Errorf("[expired] expected no login after %s … got one", LinkTTL)
	}
	if _, _, ok := a.Login("nonsense"); ok {
		t.Errorf("[unknown] expected no login … got one")
	}
	now = now.Add(-LinkTTL)
	n = a.Link(ScopeRead, "//evil.example/x")
	_, next, ok = a.Login(n)
	if !ok || next != "/" {
		t.Errorf("[offsite next] expected a login landing on / … got %q %v", next, ok)
	}
}

func TestAuthenticate(t *testing.T) {
	a := NewAuth("secret-token")
	opID, _, _ := a.Login(a.Link(ScopeOperate, "/"))
	roID, _, _ := a.Login(a.Link(ScopeRead, "/"))
	for _, c := range []struct {
		name           string
		bearer, cookie string
		ok             bool
		scope          string
		csrf           bool
	}{
		{name: "bearer", bearer: "secret-token", ok: true, scope: ScopeOperate},
		{name: "wrong bearer", bearer: "secret-tokeN"},
		{name: "wrong bearer with a good cookie", bearer: "x", cookie: opID},
		{name: "operate cookie", cookie: opID, ok: true, scope: ScopeOperate, csrf: true},
		{name: "read cookie", cookie: roID, ok: true, scope: ScopeRead, csrf: true},
		{name: "unknown cookie", cookie: "0123"},
		{name: "nothing"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if c.bearer != "" {
			r.Header.Set("Authorization", "Bearer "+c.bearer)
		}
		if c.cookie != "" {
			r.AddCookie(&http.Cookie{Name: CookieName, Value: c.cookie})
		}
		p, ok := a.Authenticate(r)
		if ok != c.ok || p.Scope != c.scope || (p.CSRF != "") != c.csrf {
			t.Errorf("[%s] expected ok=%v scope=%q csrf=%v … got ok=%v scope=%q csrf=%v", c.name, c.ok, c.scope, c.csrf, ok, p.Scope, p.CSRF != "")
		}
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
