package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/verbs"
	"herd/internal/web/auth"
)

// quickVerbs are the verbs behind a fuzzed console: they answer at once,
// keep what was typed, and an Esc closes the fake screen's dialog. The
// verbs but Inject are fakeVerbs' (its Inject waits, as a slow tmux).
type quickVerbs struct {
	fakeVerbs
	mu       sync.Mutex
	back     *fakeBackend
	injected []verbs.InjectRequest
}

var _ Verbs = (*quickVerbs)(nil)

func (q *quickVerbs) Inject(_ context.Context, req verbs.InjectRequest) (verbs.Result, error) {
	q.mu.Lock()
	q.injected = append(q.injected, req)
	q.mu.Unlock()
	if req.Text == "\x1b" {
		q.back.mu.Lock()
		q.back.screen = ""
		q.back.mu.Unlock()
	}
	return verbs.Result{Message: "sent"}, nil
}

// consoleRoutes are the requests FuzzConsoleRequest sends: NAME is the
// input's name as it is, a form body is sent as a form from the
// console's own origin, and an API route with the bearer token.
var consoleRoutes = []struct {
	method, path string
	form         bool
}{
	{"POST", "/api/v1/sessions/NAME/answer", false},
	{"POST", "/api/v1/sessions/NAME/input", false},
	{"POST", "/api/v1/sessions/NAME", false}, // NAME: session/verb
	{"POST", "/api/v1/tasks/NAME", false},    // NAME: id/verb
	{"GET", "/api/v1/usage", false},
	{"GET", "/api/v1/tasks", false},
	{"POST", "/login", true},
	{"GET", "/login", false},
	{"GET", "/a/NAME", false},
	{"POST", "/a/NAME", true},
}

const (
	fuzzAddr = "127.0.0.1:8080"
	// fuzzScreen is a Claude Code permission dialog: the need answered.
	fuzzScreen = " Do you want to proceed?\n ❯ 1. Yes\n   2. Yes, and don't ask again\n   3. No, and tell Claude what to do differently (esc)\n"
)

// pageTags are the tags of the console's own small pages: a fuzzed value
// shown on one is escaped, so no other tag appears.
var (
	pageTags = []string{"!doctype", "html", "meta", "title", "body", "h1", "p", "b", "pre", "form", "input", "button", "a"}
	tagRe    = regexp.MustCompile(`<\s*/?\s*([!a-zA-Z][a-zA-Z0-9]*)`)
	eventRe  = regexp.MustCompile(`(?i)\son[a-z]+\s*=`)
)

// quickConsole is a console over a fake backend whose one session, w-0,
// shows a permission dialog, a task t-3 in review, and quickVerbs.
func quickConsole(answerKey []byte) (*Server, *quickVerbs) {
	since := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	back := &fakeBackend{screen: fuzzScreen, sessions: []api.SessionView{{Name: "w-0", Role: "w", Host: "h", Incarnation: "i1",
		RuntimeKind: herd.RuntimeTmux, State: herd.StateRunning, Activity: herd.ActivityWaiting, StateSince: since, LastActivityAt: &since}}}
	ft := newFakeTasks()
	ft.set(herd.Task{ID: "t-3", Role: "w", State: herd.TaskReview, Session: "w-0"})
	back.TaskBackend = ft.backend()
	qv := &quickVerbs{back: back}
	return New(Options{Config: config.Web{Listen: fuzzAddr}, Host: "h", Backend: back, Verbs: qv, Events: &fakeRecorder{},
		Token: "the-token", AnswerKey: answerKey, FailDelay: time.Nanosecond}), qv
}

// FuzzConsoleRequest: any request to the console's routes that decode a
// body, a form, a query or a link, served by the real handler behind its
// checks (fake backend and verbs), answers without a panic and without a
// 5xx; an API refusal is JSON that says something; a page shows no tag
// and no event handler of the input's (every value escaped); what is
// typed into an agent by an answer has no line break; an answer link
// answers only when it is the signed one, with its form token.
func FuzzConsoleRequest(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	signer := auth.NewSigner(key, nil)
	since := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	link := signer.SignClaim(auth.AnswerClaim{Session: "w-0", Since: since, Option: "1", Label: "Yes",
		Expires: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), Nonce: "00112233445566778899aabb"})
	seeds := []struct {
		route uint8
		name  string
		body  string
	}{
		{0, "w-0", `{"option":"1"}`},
		{0, "w-0", `{"text":"use the other file"}`},
		{0, "w-0", `{"text":"two\nlines"}`},
		{0, "w-0", `{"option":"1","text":"x"}`},
		{0, "w-0", `{"option":"9","since":"2026-01-01T09:00:00Z"}`},
		{0, "w-0", `{"option":"1"} {"option":"2"}`},
		{1, "w-0", `{"text":"hello","no_enter":true}`},
		{1, "w-0", `{"key":"ctrl-c"}`},
		{1, "w-0", `{"key":"f13"}`},
		{1, "w-0", `{"text":"a\nb","multiline":true}`},
		{2, "w-0/stop", `{"grace":"5s"}`},
		{2, "w-0/explode", ``},
		{3, "t-3/comment", `{"text":"look at line 3"}`},
		{3, "t-3/approve", ``},
		{3, "t-x/cancel", `{}`},
		{4, "", `by=day&since=14d&role=w`},
		{4, "", `since=forever`},
		{5, "", `state=review&role=w`},
		{6, "", `t=abc`},
		{6, "", `t=%zz`},
		{7, "", `t=<script>alert(1)</script>`},
		{8, link, ``},
		{8, link + "x", ``},
		{8, "<img src=x onerror=alert(1)>", ``},
		{9, link, "f=" + signer.FormToken(link)},
		{9, link, "f=wrong"},
	}
	for _, s := range seeds {
		f.Add(s.route, s.name, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, route uint8, name string, body []byte) {
		rt := consoleRoutes[int(route)%len(consoleRoutes)]
		s, qv := quickConsole(key)
		var req *http.Request
		path := strings.Replace(rt.path, "NAME", name, 1)
		switch {
		case rt.method == "GET":
			req = httptest.NewRequest("GET", "/", nil)
			req.URL.RawQuery = string(body)
		case rt.form:
			req = httptest.NewRequest("POST", "/", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		default:
			req = httptest.NewRequest("POST", "/", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
		}
		req.URL.Path = path
		req.Host = fuzzAddr
		req.Header.Set("Origin", "http://"+fuzzAddr)
		if strings.HasPrefix(rt.path, "/api/") {
			req.Header.Set("Authorization", "Bearer the-token")
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		code, out := rec.Code, rec.Body.String()
		if code >= 500 {
			t.Fatalf("%s %s %q: %d %s (nothing behind the console fails)", rt.method, path, body, code, out)
		}
		ct := rec.Header().Get("Content-Type")
		switch {
		case code >= 300 && code < 400:
		case strings.HasPrefix(ct, "text/html"):
			for _, m := range tagRe.FindAllStringSubmatch(out, -1) {
				if !slices.Contains(pageTags, strings.ToLower(m[1])) {
					t.Fatalf("%s %s %q: the page holds a tag <%s> of the input's: %s", rt.method, path, body, m[1], out)
				}
			}
			if eventRe.MatchString(out) {
				t.Fatalf("%s %s %q: the page holds an event handler: %s", rt.method, path, body, out)
			}
		case strings.HasPrefix(path, "/api/") && code != http.StatusOK:
			if strings.HasPrefix(out, "404 page not found") || strings.HasPrefix(out, "Method Not Allowed") {
				break // no route of the mux's
			}
			var e api.Error
			if ct != "application/json" || json.Unmarshal([]byte(out), &e) != nil || strings.TrimSpace(e.Error) == "" {
				t.Fatalf("%s %s %q: %d without a JSON error that says something: %q", rt.method, path, body, code, out)
			}
		}
		if code == http.StatusOK && !rt.form && rt.method == "POST" {
			if b := bytes.TrimSpace(body); len(b) > 0 && !json.Valid(b) {
				t.Fatalf("%s %s: a body that is not one JSON value accepted: %q", rt.method, path, body)
			}
		}
		if rt.method == "POST" && rt.path == "/a/NAME" && name == link && string(body) == "f="+signer.FormToken(link) &&
			(code != http.StatusOK || len(qv.injected) != 1) {
			t.Fatalf("the signed answer link with its form did not answer: %d %s", code, out)
		}
		if rec.Header().Get("Set-Cookie") != "" {
			t.Fatalf("%s %s %q: logged in with no login link made", rt.method, path, body)
		}
		qv.mu.Lock()
		defer qv.mu.Unlock()
		if strings.HasPrefix(rt.path, "/a/") && len(qv.injected) > 0 {
			if rt.method != "POST" || name != link || string(body) != "f="+signer.FormToken(link) && !strings.Contains(string(body), signer.FormToken(link)) {
				t.Fatalf("%s %s %q: an answer link answered without being the signed link and its form", rt.method, path, body)
			}
		}
		if rt.path == "/api/v1/sessions/NAME/answer" || strings.HasPrefix(rt.path, "/a/") {
			for _, in := range qv.injected {
				if in.Multiline || verbs.CheckText(in.Text, false) != nil {
					t.Fatalf("an answer typed %q: %q", in.Text, body)
				}
			}
		}
	})
}

// TestBodyOneValue: a JSON body of one value and a second is refused
// (400) with nothing typed, not answered as its first says while the rest
// is dropped (found by FuzzConsoleRequest).
func TestBodyOneValue(t *testing.T) {
	s, qv := quickConsole(nil)
	for _, x := range []struct{ path, body string }{
		{"/api/v1/sessions/w-0/answer", `{"option":"1"} {"option":"3"}`},
		{"/api/v1/sessions/w-0/input", `{"key":"enter"}{"key":"ctrl-c"}`},
		{"/api/v1/sessions/w-0/stop", `{"grace":"1s"} x`},
		{"/api/v1/tasks/t-3/comment", `{"text":"a"}]`},
	} {
		req := httptest.NewRequest(http.MethodPost, "http://"+fuzzAddr+x.path, strings.NewReader(x.body))
		req.Header.Set("Authorization", "Bearer the-token")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "after the JSON value") {
			t.Errorf("[%s %s] expected 400 … got %d %s", x.path, x.body, rec.Code, rec.Body)
		}
	}
	if len(qv.injected) != 0 {
		t.Errorf("expected nothing typed … got %+v", qv.injected)
	}
}
