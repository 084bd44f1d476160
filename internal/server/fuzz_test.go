package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/reaper"
	"herd/internal/roles"
	"herd/internal/slots"
	"herd/internal/store"
	"herd/internal/tasks"
	"herd/internal/verbs"
)

// fuzzSlots stands in for every component behind the verbs: every
// session is a live tmux session of this host, no role is known, and
// what reached it is kept.
type fuzzSlots struct {
	mu       sync.Mutex
	replicas []int
	graces   []time.Duration
}

var (
	_ verbs.SessionSlots = (*fuzzSlots)(nil)
	_ verbs.RoleSlots    = (*fuzzSlots)(nil)
	_ verbs.Reader       = (*fuzzSlots)(nil)
	_ verbs.Reaper       = (*fuzzSlots)(nil)
	_ verbs.Injector     = (*fuzzSlots)(nil)
)

func (f *fuzzSlots) grace(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.graces = append(f.graces, d)
}

func (f *fuzzSlots) Stop(_ context.Context, req slots.StopRequest) error {
	f.grace(req.Grace)
	return nil
}
func (f *fuzzSlots) Resume(context.Context, string) error { return nil }
func (f *fuzzSlots) Restart(_ context.Context, req slots.RestartRequest) (string, error) {
	f.grace(req.Grace)
	return "i-1", nil
}
func (f *fuzzSlots) Reset(context.Context, string) (bool, error)              { return false, nil }
func (f *fuzzSlots) Signal(context.Context, string, unix.Signal) (int, error) { return 42, nil }
func (f *fuzzSlots) Apply(_ context.Context, rs []herd.Role, _ roles.ApplyOptions) ([]roles.RoleChange, error) {
	return make([]roles.RoleChange, len(rs)), nil
}
func (f *fuzzSlots) Scale(_ context.Context, _ string, n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replicas = append(f.replicas, n)
	return nil
}
func (f *fuzzSlots) DeleteRole(context.Context, string) (int, error) { return 0, nil }
func (f *fuzzSlots) Rollout(context.Context, roles.RolloutRequest) (roles.RolloutReport, error) {
	return roles.RolloutReport{}, nil
}
func (f *fuzzSlots) Archive(context.Context, string) error { return nil }
func (f *fuzzSlots) Kick()                                 {}
func (f *fuzzSlots) Pass(context.Context, reaper.PassOptions) (api.ReapReport, error) {
	return api.ReapReport{}, nil
}
func (f *fuzzSlots) LogPass(api.ReapReport) {}
func (f *fuzzSlots) Inject(context.Context, herd.Incarnation, string, bool) error {
	return nil
}
func (f *fuzzSlots) Session(_ context.Context, name string) (herd.Session, error) {
	return herd.Session{Name: name, Role: "w", Host: "h", Incarnation: "i-1", RuntimeKind: herd.RuntimeTmux, State: herd.StateRunning}, nil
}
func (f *fuzzSlots) Role(context.Context, string) (herd.Role, error) {
	return herd.Role{}, store.ErrNotFound
}
func (f *fuzzSlots) Incarnation(_ context.Context, id string) (herd.Incarnation, error) {
	return herd.Incarnation{ID: id}, nil
}
func (f *fuzzSlots) Sessions(context.Context, string) ([]herd.Session, error) { return nil, nil }
func (f *fuzzSlots) Stale(context.Context, string) (bool, error)              { return false, nil }

// fuzzRoutes are the routes whose requests FuzzAPIRequest sends: every
// one that decodes a body or a query and can be served without a store
// (not the usage ledger's, the event log's, a wait's).
// NAME is replaced by the input's name, as it is.
var fuzzRoutes = []struct {
	method, path string
	// body: what the route reads of a body.
	body bodyUse
}{
	{"POST", "/v1/sessions/NAME/stop", optional},
	{"POST", "/v1/sessions/NAME/inject", required},
	{"POST", "/v1/sessions/NAME/restart", optional},
	{"POST", "/v1/sessions/NAME/signal", optional},
	{"POST", "/v1/sessions/NAME/resume", unread},
	{"POST", "/v1/roles", required},
	{"POST", "/v1/roles/NAME/scale", required},
	{"POST", "/v1/roles/NAME/rollout", optional},
	{"POST", "/v1/roles/NAME/restart", optional},
	{"POST", "/v1/reap", optional},
	{"POST", "/v1/tasks", required},
	{"POST", "/v1/tasks/NAME", optional},
	{"GET", "/v1/tasks", unread},
}

// bodyUse is what a route reads of a request's body.
type bodyUse int

const (
	unread   bodyUse = iota // no body is read
	optional                // an empty body, or one JSON value
	required                // one JSON value (an empty or malformed body is refused)
)

// FuzzAPIRequest: any request to the socket API's routes that decode a
// body or a query, served by the real handler over the real verbs (their
// components faked), answers without a panic: a refusal is a 4xx with a
// JSON error that says something, never a 5xx (the components never
// fail); what is accepted reached the component valid (text an inject
// may type, replicas in bounds, a grace that parses, a task's role, prompt
// and actor as the API allows them).
func FuzzAPIRequest(f *testing.F) {
	seeds := []struct {
		route       uint8
		name, query string
		body        string
	}{
		{0, "w-0", "", `{"grace":"10s"}`},
		{0, "w-0", "", ``},
		{1, "w-0", "", `{"text":"yes","enter":true}`},
		{1, "w-0", "", `{"text":"a\nb","multiline":true} {}`},
		{2, "w-0", "", `{"grace":"-1s"}`},
		{3, "w-0", "", `{"signal":"SIGTERM"}`},
		{3, "w-0", "", `{"signal":"9"}`},
		{5, "", "", `[{"name":"w","agent":"claude","replicas":1}]`},
		{6, "w", "", `{"replicas":3}`},
		{6, "w", "", `{"replicas":-1}`},
		{6, "w", "", `{"replicas":1e3}`},
		{6, "w", "", `{"replicas":3} {"replicas":-1}`},
		{7, "w", "", `{"max_unavailable":2,"ready":"5m","min_ready":"10s"}`},
		{8, "w", "", `{"grace":"1h"}`},
		{9, "", "dry_run=1", ``},
		{9, "", "dry_run=maybe", `{"dry_run":true}`},
		{10, "", "", `{"role":"worker","repo":"/src/app","check":["go","test"],"prompt":"fix it","by":"w-0"}`},
		{10, "", "", `{"role":"worker","prompt":"x","by":"a\u0007b"}`},
		{11, "t-3/comment", "", `{"text":"look at line 3","by":"alice"}`},
		{11, "t-3/approve", "", ``},
		{11, "t-0/cancel", "", `{}`},
		{12, "", "state=review,needs_you&state=queued&role=worker", ``},
	}
	for _, s := range seeds {
		f.Add(s.route, s.name, s.query, []byte(s.body))
	}
	fs := &fuzzSlots{}
	ft := &fakeTasks{}
	v := verbs.New(verbs.Options{Host: "h", Sessions: fs, Roles: fs, Kicker: fs, Reaper: fs, Tmux: fs, Reader: fs})
	h := New(Options{Verbs: v, Tasks: ft}).Handler()
	f.Fuzz(func(t *testing.T, route uint8, name, query string, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		fs.mu.Lock()
		fs.replicas, fs.graces = nil, nil
		fs.mu.Unlock()
		*ft = fakeTasks{}
		req := httptest.NewRequest(rt.method, "/", bytes.NewReader(body))
		req.URL.Path = strings.Replace(rt.path, "NAME", name, 1)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		if code >= 300 && code < 400 {
			return // the mux's redirect of an unclean path
		}
		if code >= 500 {
			t.Fatalf("%s %s?%s %q: %d %s (the components never fail)", rt.method, req.URL.Path, query, body, code, rec.Body)
		}
		if code == http.StatusNotFound || code == http.StatusMethodNotAllowed {
			if strings.HasPrefix(rec.Body.String(), "404 page not found") || strings.HasPrefix(rec.Body.String(), "Method Not Allowed") {
				return // no route of the mux's
			}
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s: %d with content type %q", rt.method, req.URL.Path, code, ct)
		}
		if code != http.StatusOK {
			var e api.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || strings.TrimSpace(e.Error) == "" {
				t.Fatalf("%s %s %q: %d without an error that says something: %q", rt.method, req.URL.Path, body, code, rec.Body)
			}
			return
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s: 200 with a body that is not JSON: %q", rt.method, req.URL.Path, rec.Body)
		}
		if b := bytes.TrimSpace(body); rt.body == required || rt.body == optional && len(b) > 0 {
			if !json.Valid(b) {
				t.Fatalf("%s %s: a body that is not one JSON value accepted: %q", rt.method, req.URL.Path, body)
			}
		}
		var in struct {
			Text      string `json:"text"`
			Multiline bool   `json:"multiline"`
		}
		json.Unmarshal(body, &in)
		switch rt.method + " " + rt.path {
		case "POST /v1/sessions/NAME/inject":
			if err := verbs.CheckText(in.Text, in.Multiline); err != nil {
				t.Fatalf("inject accepted text no inject may type (%v): %q", err, body)
			}
		case "POST /v1/roles/NAME/scale":
			for _, n := range fs.replicas {
				if n < 0 || n > config.MaxReplicas {
					t.Fatalf("scale to %d reached the component: %q", n, body)
				}
			}
		case "POST /v1/tasks":
			a := ft.add
			if !herd.ValidRoleName(a.Role) || strings.TrimSpace(a.Prompt) == "" || len(a.Prompt) > herd.MaxTaskPrompt {
				t.Fatalf("a task added with role %q and a prompt of %d bytes: %q", a.Role, len(a.Prompt), body)
			}
			checkBy(t, a.By, body)
		case "POST /v1/tasks/NAME":
			vr := ft.verb
			if herd.TaskSeq(vr.ID) <= 0 || len(vr.Text) > tasks.MaxComment {
				t.Fatalf("a task verb on %q with %d bytes of text reached the component: %q", vr.ID, len(vr.Text), body)
			}
			checkBy(t, vr.By, body)
		}
		fs.mu.Lock()
		defer fs.mu.Unlock()
		for _, g := range fs.graces {
			if g < 0 {
				t.Fatalf("a negative grace %s reached the component: %q", g, body)
			}
		}
	})
}

// checkBy fails t unless by names who acts as the API allows.
func checkBy(t *testing.T, by string, body []byte) {
	t.Helper()
	if by == "" || len(by) > maxBy || !utf8.ValidString(by) || strings.ContainsFunc(by, unicode.IsControl) {
		t.Fatalf("a task acted on by %q: %q", by, body)
	}
}
