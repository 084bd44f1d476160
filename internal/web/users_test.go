package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herd/internal/store"
	"herd/internal/store/sqlite"
	"herd/internal/users"
	"herd/internal/web/auth"
)

// awayUsers are users whose store is away: every read fails.
type awayUsers struct{}

func (awayUsers) User(context.Context, string) (store.User, error) {
	return store.User{}, users.ErrStoreAway
}

func (awayUsers) TokenUser(context.Context, string) (store.User, error) {
	return store.User{}, users.ErrStoreAway
}

// TestUsersConsole: people log in by name against a real store: a
// user's token and login link act, and the console's events name the
// user in data.by; a read-only user sees and cannot act; a removed
// user's token and cookie are refused at their next request, and a
// user added again under the name does not revive them.
func TestUsersConsole(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	people := users.New(st)
	c := newTestConsole(t, func(o *Options, _ string) {
		o.Users = people
		o.limits = defaultLimits()
		o.limits.recheck = 20 * time.Millisecond
	})
	for !c.srv.Serving() {
		time.Sleep(time.Millisecond)
	}
	ctx := t.Context()
	for _, u := range []struct {
		name     string
		readOnly bool
	}{{"alice", false}, {"rob", true}} {
		if _, err := people.Add(ctx, u.name, u.readOnly); err != nil {
			t.Fatal(err)
		}
	}
	aliceTok, _, err := people.Token(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	robTok, _, err := people.Token(ctx, "rob")
	if err != nil {
		t.Fatal(err)
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	cl := &http.Client{}
	input := map[string]any{"text": "hello"}

	// A user's browser, logged in by a link of its own.
	userBrowser := func(name string) (*http.Client, string) {
		t.Helper()
		rec := httptest.NewRecorder()
		c.srv.LinkHandler().ServeHTTP(rec, httptest.NewRequest("POST", LinkPath, strings.NewReader(`{"user":"`+name+`"}`)))
		var res LinkResult
		if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil || rec.Code != http.StatusOK || res.User != name {
			t.Fatalf("[link of %s] expected a link … got %d %s", name, rec.Code, rec.Body)
		}
		jar, _ := cookiejar.New(nil)
		b := &http.Client{Jar: jar}
		resp := logIn(t, b, res.URL)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("[login of %s] expected 200 … got %d", name, resp.StatusCode)
		}
		var w Whoami
		c.call(t, b, http.MethodGet, "/api/v1/whoami", nil, nil, &w)
		if w.User != name {
			t.Errorf("[whoami of %s] expected the user named … got %+v", name, w)
		}
		return b, w.CSRF
	}
	aliceBrowser, aliceCSRF := userBrowser("alice")
	robBrowser, robCSRF := userBrowser("rob")
	browserPost := func(csrf string) map[string]string {
		return map[string]string{auth.CSRFHeader: csrf, "Origin": c.url}
	}

	answer := AnswerRequest{Option: "1"}
	for _, step := range []struct {
		name   string
		cl     *http.Client
		method string
		path   string
		h      map[string]string
		want   int
		body   any
	}{
		{"rob's token cannot answer", cl, "POST", "/api/v1/sessions/w-0/answer", bearer(robTok), 403, answer},
		{"rob's browser cannot answer", robBrowser, "POST", "/api/v1/sessions/w-0/answer", browserPost(robCSRF), 403, answer},
		{"alice's token answers", cl, "POST", "/api/v1/sessions/w-0/answer", bearer(aliceTok), 200, answer},
		{"alice's token reads", cl, "GET", "/api/v1/sessions", bearer(aliceTok), 200, nil},
		{"alice's token types", cl, "POST", "/api/v1/sessions/w-0/input", bearer(aliceTok), 200, nil},
		{"alice's browser types", aliceBrowser, "POST", "/api/v1/sessions/w-0/input", browserPost(aliceCSRF), 200, nil},
		{"rob's token reads", cl, "GET", "/api/v1/sessions", bearer(robTok), 200, nil},
		{"rob's token cannot type", cl, "POST", "/api/v1/sessions/w-0/input", bearer(robTok), 403, nil},
		{"rob's browser cannot type", robBrowser, "POST", "/api/v1/sessions/w-0/input", browserPost(robCSRF), 403, nil},
		{"rob's browser cannot stop", robBrowser, "POST", "/api/v1/sessions/w-0/stop", browserPost(robCSRF), 403, nil},
		{"a wrong token", cl, "GET", "/api/v1/sessions", bearer(aliceTok + "0"), 401, nil},
		{"the machine's token still works", cl, "GET", "/api/v1/sessions", bearer("the-token"), 200, nil},
	} {
		body := step.body
		if body == nil && step.method == "POST" {
			body = input
		}
		if got := c.call(t, step.cl, step.method, step.path, step.h, body, nil); got != step.want {
			t.Errorf("[%s] expected %d … got %d", step.name, step.want, got)
		}
	}
	var bys []string
	c.rec.mu.Lock()
	for _, e := range c.rec.events {
		bys = append(bys, e.Kind+"/"+e.Reason+" by "+e.Data["by"].(string))
	}
	c.rec.mu.Unlock()
	if want := []string{"answered/permission by alice", "console/input by alice", "console/input by alice"}; strings.Join(bys, ";") != strings.Join(want, ";") {
		t.Errorf("[events] expected %v … got %v", want, bys)
	}

	// alice's open event stream, and the machine's.
	stream := func(tok string) <-chan error {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, c.url+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := cl.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("[stream] expected 200 … got %v %v", resp, err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		ended := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, resp.Body)
			ended <- err
		}()
		return ended
	}
	aliceStream, machineStream := stream(aliceTok), stream("the-token")

	// Removed: the token and the cookie are refused at once, and stay
	// refused when the name is added again; the stream ends.
	if err := people.Remove(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-aliceStream:
	case <-time.After(10 * time.Second):
		t.Errorf("[removed alice's event stream] expected it to end … still open after 10s")
	}
	select {
	case err := <-machineStream:
		t.Errorf("[the machine's event stream] expected it open … ended: %v", err)
	default:
	}
	if _, err := people.Add(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	if got := c.call(t, cl, "GET", "/api/v1/sessions", bearer(aliceTok), nil, nil); got != 401 {
		t.Errorf("[removed alice's token] expected 401 … got %d", got)
	}
	if got := c.call(t, aliceBrowser, "GET", "/api/v1/sessions", nil, nil, nil); got != 401 {
		t.Errorf("[removed alice's cookie] expected 401 … got %d", got)
	}

	// A link for an unknown user is refused with why.
	rec := httptest.NewRecorder()
	c.srv.LinkHandler().ServeHTTP(rec, httptest.NewRequest("POST", LinkPath, strings.NewReader(`{"user":"nobody"}`)))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "user nobody not found") {
		t.Errorf("[link of an unknown user] expected 404 naming the user … got %d %s", rec.Code, rec.Body)
	}
}

// TestUsersStoreAway: while the users cannot be read, a person's token
// is refused with 503 (fail closed); the machine's token still works.
func TestUsersStoreAway(t *testing.T) {
	c := newTestConsole(t, func(o *Options, _ string) { o.Users = awayUsers{} })
	for !c.srv.Serving() {
		time.Sleep(time.Millisecond)
	}
	cl := &http.Client{}
	if got := c.call(t, cl, "GET", "/api/v1/sessions", map[string]string{"Authorization": "Bearer someones-token"}, nil, nil); got != http.StatusServiceUnavailable {
		t.Errorf("[a user's token, store away] expected 503 … got %d", got)
	}
	if got := c.call(t, cl, "GET", "/api/v1/sessions", map[string]string{"Authorization": "Bearer the-token"}, nil, nil); got != 200 {
		t.Errorf("[the machine's token, store away] expected 200 … got %d", got)
	}
	rec := httptest.NewRecorder()
	c.srv.LinkHandler().ServeHTTP(rec, httptest.NewRequest("POST", LinkPath, strings.NewReader(`{"user":"alice"}`)))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("[a user's link, store away] expected 503 … got %d %s", rec.Code, rec.Body)
	}
}
