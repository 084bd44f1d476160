package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/api"
	"herd/internal/errs"
	"herd/internal/server"
	"herd/internal/store"
	"herd/internal/taskflow"
	"herd/internal/tasks"
	"herd/internal/web/auth"
)

// fakeTasks is the daemon's task component behind its real API routes
// (internal/server), which the console reads through APIBackend as the
// daemon's does: it serves canned tasks, records what it is asked, and
// refuses a verb the task's state does not allow (taskflow.Allowed); a
// verb it allows leaves the task as it was.
type fakeTasks struct {
	// mu guards the fields below.
	mu     sync.Mutex
	tasks  []herd.Task
	events map[string][]herd.Event
	diffs  map[string]tasks.Diff
	// err, when set, answers every call.
	err error
	// filter is what List was last asked; query the raw query the API
	// received for it.
	filter store.TaskFilter
	query  string
	verbs  []verbCall
}

// verbCall is one verb that reached the component.
type verbCall struct {
	verb string
	req  tasks.VerbRequest
}

var _ server.Tasks = (*fakeTasks)(nil)

func newFakeTasks() *fakeTasks {
	return &fakeTasks{events: map[string][]herd.Event{}, diffs: map[string]tasks.Diff{}}
}

// backend is the console's task backend over the daemon's API serving f.
func (f *fakeTasks) backend() APIBackend {
	h := server.New(server.Options{Tasks: f}).Handler()
	return APIBackend{API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/tasks" {
			f.mu.Lock()
			f.query = r.URL.RawQuery
			f.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})}
}

// set replaces the tasks served.
func (f *fakeTasks) set(ts ...herd.Task) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tasks = ts
}

// calls are the verbs that reached the component.
func (f *fakeTasks) calls() []verbCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.verbs)
}

func (f *fakeTasks) find(id string) (herd.Task, error) {
	for _, t := range f.tasks {
		if t.ID == id {
			return t, nil
		}
	}
	return herd.Task{}, errs.New(errs.NotFound, "task "+id+" not found")
}

func (f *fakeTasks) Add(context.Context, tasks.AddRequest) (herd.Task, error) {
	return herd.Task{}, errs.Badf("the console adds no task")
}

func (f *fakeTasks) Describe(_ context.Context, id string) (tasks.Described, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return tasks.Described{}, f.err
	}
	t, err := f.find(id)
	return tasks.Described{Task: t, Events: f.events[id]}, err
}

func (f *fakeTasks) List(_ context.Context, flt store.TaskFilter) ([]herd.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filter = flt
	if f.err != nil {
		return nil, f.err
	}
	var out []herd.Task
	for _, t := range f.tasks {
		if (len(flt.States) == 0 || slices.Contains(flt.States, t.State)) && (flt.Role == "" || flt.Role == t.Role) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (f *fakeTasks) Verb(_ context.Context, verb string, req tasks.VerbRequest) (herd.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return herd.Task{}, f.err
	}
	t, err := f.find(req.ID)
	if err != nil {
		return t, err
	}
	if err := taskflow.Allowed(verb, t.State); err != nil {
		return t, err
	}
	f.verbs = append(f.verbs, verbCall{verb, req})
	return t, nil
}

func (f *fakeTasks) Diff(_ context.Context, id string) (tasks.Diff, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return tasks.Diff{}, f.err
	}
	if _, err := f.find(id); err != nil {
		return tasks.Diff{}, err
	}
	return f.diffs[id], nil
}

// reviewTask is a task waiting for its review.
func reviewTask() herd.Task {
	t0 := time.Now().Add(-time.Hour).UTC()
	return herd.Task{ID: "t-1", Title: "greet", Role: "w", State: herd.TaskReview, Session: "w-0", Branch: "herd/t-1", Base: "main",
		Repo: "/src/app", Commits: 2, Prompt: "Add a greeting", CreatedAt: t0, UpdatedAt: t0}
}

// TestTaskRoutes: the task routes are behind the console's checks (login,
// CSRF, Origin, scope, body size); a verb reaches the task component named
// after the login, whatever the body says, and is a console event; the
// console offers a person's verbs only.
func TestTaskRoutes(t *testing.T) {
	c := newTestConsole(t)
	c.tasks.set(reviewTask())
	op, csrf := c.browser(t, auth.ScopeOperate)
	ro, roCSRF := c.browser(t, auth.ScopeRead)
	anon := &http.Client{}
	same := c.url
	post := map[string]string{"Origin": same, auth.CSRFHeader: csrf}
	token := map[string]string{"Authorization": "Bearer the-token"}
	for _, x := range []struct {
		name   string
		cl     *http.Client
		method string
		path   string
		h      map[string]string
		body   any
		want   int
	}{
		{"board page", op, "GET", "/tasks", nil, nil, 200},
		{"task page", op, "GET", "/tasks/t-1", nil, nil, 200},
		{"board page without login", anon, "GET", "/tasks", nil, nil, 401},
		{"list without login", anon, "GET", "/api/v1/tasks", nil, nil, 401},
		{"task without login", anon, "GET", "/api/v1/tasks/t-1", nil, nil, 401},
		{"diff without login", anon, "GET", "/api/v1/tasks/t-1/diff", nil, nil, 401},
		{"verb without login", anon, "POST", "/api/v1/tasks/t-1/approve", map[string]string{"Origin": same}, nil, 401},
		{"list from a rebinding host", op, "GET", "/api/v1/tasks", map[string]string{"Host": "evil.example"}, nil, 421},
		{"list", op, "GET", "/api/v1/tasks", nil, nil, 200},
		{"read scope lists", ro, "GET", "/api/v1/tasks", nil, nil, 200},
		{"read scope reads a task", ro, "GET", "/api/v1/tasks/t-1", nil, nil, 200},
		{"read scope reads a diff", ro, "GET", "/api/v1/tasks/t-1/diff", nil, nil, 200},
		{"read scope approves", ro, "POST", "/api/v1/tasks/t-1/approve", map[string]string{"Origin": same, auth.CSRFHeader: roCSRF}, nil, 403},
		{"post without csrf", op, "POST", "/api/v1/tasks/t-1/approve", map[string]string{"Origin": same}, nil, 403},
		{"post with wrong csrf", op, "POST", "/api/v1/tasks/t-1/approve", map[string]string{"Origin": same, auth.CSRFHeader: "x"}, nil, 403},
		{"post from another origin", op, "POST", "/api/v1/tasks/t-1/cancel", map[string]string{"Origin": "http://127.0.0.1:1", auth.CSRFHeader: csrf}, nil, 403},
		{"post without origin", op, "POST", "/api/v1/tasks/t-1/cancel", map[string]string{auth.CSRFHeader: csrf}, nil, 403},
		{"list is read-only", op, "POST", "/api/v1/tasks", post, map[string]string{"role": "w", "prompt": "x"}, 405},
		{"an agent's verb", op, "POST", "/api/v1/tasks/t-1/done", post, TaskVerbRequest{Text: "done"}, 404},
		{"no such verb", anon, "POST", "/api/v1/tasks/t-1/explode", token, nil, 404},
		{"not a task id", op, "GET", "/api/v1/tasks/x", nil, nil, 400},
		{"no such task", op, "GET", "/api/v1/tasks/t-9", nil, nil, 404},
		{"no such task's diff", op, "GET", "/api/v1/tasks/t-9/diff", nil, nil, 404},
		{"verb on no such task", op, "POST", "/api/v1/tasks/t-9/approve", post, nil, 404},
		{"comment without text", op, "POST", "/api/v1/tasks/t-1/comment", post, TaskVerbRequest{}, 400},
		{"body over the bound", op, "POST", "/api/v1/tasks/t-1/comment", post, TaskVerbRequest{Text: strings.Repeat("x", maxBody)}, 413},
		{"bad body", op, "POST", "/api/v1/tasks/t-1/comment", post, "not an object", 400},
		{"retry a task in review", op, "POST", "/api/v1/tasks/t-1/retry", post, nil, 409},
		{"browser approves", op, "POST", "/api/v1/tasks/t-1/approve", post, nil, 200},
		{"token comments, naming another", anon, "POST", "/api/v1/tasks/t-1/comment", token,
			map[string]string{"text": "src/a.go:3: rename", "by": "mallory"}, 200},
	} {
		if got := c.call(t, x.cl, x.method, x.path, x.h, x.body, nil); got != x.want {
			t.Errorf("[%s] expected %d … got %d", x.name, x.want, got)
		}
	}
	calls := c.tasks.calls()
	if len(calls) != 2 || calls[0].verb != "approve" || calls[1].verb != "comment" {
		t.Fatalf("[verbs] expected the allowed approve and comment to reach the component … got %+v", calls)
	}
	if by := calls[0].req.By; !strings.HasPrefix(by, "browser:") || !strings.Contains(by, " from 127.0.0.1:") {
		t.Errorf("[approve] expected the browser's login and address as who acts … got %q", by)
	}
	if req := calls[1].req; !strings.HasPrefix(req.By, "token from 127.0.0.1:") || req.Text != "src/a.go:3: rename" || req.ID != "t-1" {
		t.Errorf("[comment] expected the token, not the body's word, as who acts, and the text … got %+v", req)
	}
	if kinds := c.rec.kinds(); !slices.Equal(kinds, []string{"console/task_approve", "console/task_comment"}) {
		t.Errorf("[events] expected a console event per verb … got %v", kinds)
	}
	c.rec.mu.Lock()
	e := c.rec.events[0]
	c.rec.mu.Unlock()
	if e.Session != "w-0" || e.Data["task"] != "t-1" || !strings.Contains(e.Message, "approve by browser:") {
		t.Errorf("[event] expected it on the task's session, naming the task and the login … got %+v", e)
	}
}

// TestTaskListQuery: the list's state and role reach the API as asked,
// nothing else does, and the API's refusal of a bad one comes back.
func TestTaskListQuery(t *testing.T) {
	c := newTestConsole(t)
	rev := reviewTask()
	queued := herd.Task{ID: "t-2", Role: "x", State: herd.TaskQueued}
	c.tasks.set(rev, queued)
	var got []herd.Task
	if code := c.call(t, &http.Client{}, "GET", "/api/v1/tasks?state=review,needs_you&state=queued&role=w&after=3&by=x",
		map[string]string{"Authorization": "Bearer the-token"}, nil, &got); code != 200 {
		t.Fatalf("[list] expected 200 … got %d", code)
	}
	c.tasks.mu.Lock()
	flt, raw := c.tasks.filter, c.tasks.query
	c.tasks.mu.Unlock()
	q, _ := url.ParseQuery(raw)
	if diff := cmp.Diff(url.Values{"state": {"review,needs_you", "queued"}, "role": {"w"}}, q); diff != "" {
		t.Errorf("[query] expected state and role alone passed on (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(store.TaskFilter{States: []herd.TaskState{herd.TaskReview, herd.TaskNeedsYou, herd.TaskQueued}, Role: "w"}, flt); diff != "" {
		t.Errorf("[filter] expected the API's reading of it (-want +got):\n%s", diff)
	}
	if len(got) != 1 || got[0].ID != "t-1" {
		t.Errorf("[list] expected the task in review of role w … got %+v", got)
	}
	var e api.Error
	if code := c.call(t, &http.Client{}, "GET", "/api/v1/tasks?state=lost", map[string]string{"Authorization": "Bearer the-token"}, nil, &e); code != 400 ||
		!strings.Contains(e.Error, `state "lost" is not a task state`) {
		t.Errorf("[bad state] expected the API's 400 … got %d %q", code, e.Error)
	}
	if code := c.call(t, &http.Client{}, "GET", "/api/v1/tasks", map[string]string{"Authorization": "Bearer the-token"}, nil, &got); code != 200 || len(got) != 2 {
		t.Errorf("[no query] expected every task … got %d %+v", code, got)
	}
}

// TestTaskErrors: the task component's errors come back with the status
// their kind maps to, as from the socket API, with their message; a
// daemon without tasks is 503.
func TestTaskErrors(t *testing.T) {
	c := newTestConsole(t)
	c.tasks.set(reviewTask())
	h := map[string]string{"Authorization": "Bearer the-token"}
	for _, x := range []struct {
		err  error
		want int
	}{
		{errs.New(errs.Conflict, "task t-1 changed meanwhile; look again"), 409},
		{errs.New(errs.NotFound, "task t-1 not found"), 404},
		{errs.Badf("task t-1: the text is too long"), 400},
		{errs.New(errs.Unavailable, "the store is away"), 503},
		{fmt.Errorf("disk on fire"), 500},
	} {
		c.tasks.mu.Lock()
		c.tasks.err = x.err
		c.tasks.mu.Unlock()
		for _, path := range []string{"/api/v1/tasks", "/api/v1/tasks/t-1", "/api/v1/tasks/t-1/diff", "/api/v1/tasks/t-1/cancel"} {
			method := "GET"
			if strings.HasSuffix(path, "/cancel") {
				method = "POST"
			}
			var e api.Error
			if code := c.call(t, &http.Client{}, method, path, h, nil, &e); code != x.want || e.Error != x.err.Error() {
				t.Errorf("[%s %s: %v] expected %d and the message … got %d %q", method, path, x.err, x.want, code, e.Error)
			}
		}
	}
	if kinds := c.rec.kinds(); len(kinds) != 0 {
		t.Errorf("[events] expected no console event for a verb refused … got %v", kinds)
	}

	// A daemon without the task component.
	c.back.TaskBackend = APIBackend{API: server.New(server.Options{}).Handler()}
	var e api.Error
	if code := c.call(t, &http.Client{}, "GET", "/api/v1/tasks", h, nil, &e); code != 503 || !strings.Contains(e.Error, "not enabled") {
		t.Errorf("[no tasks] expected 503 … got %d %q", code, e.Error)
	}
}

// TestTaskHostileBytes: what an agent or a person wrote (a title, a
// prompt, a check's output, a diff, an event) comes back from every task
// route as the same string: the JSON carries it whole, and no markup of
// it is read as markup (the pages put it in as text).
func TestTaskHostileBytes(t *testing.T) {
	c := newTestConsole(t)
	hostile := "</script><script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">\u2028\u2029\x1b[31m&amp;'\"\x00"
	task := reviewTask()
	task.Title, task.Prompt, task.CheckTail, task.Reason = hostile, "do it\n"+hostile, hostile, hostile
	diff := "diff --git a/" + hostile + " b/" + hostile + "\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-" + hostile + "\n+" + hostile + "\n"
	c.tasks.set(task)
	c.tasks.mu.Lock()
	c.tasks.diffs["t-1"] = tasks.Diff{Task: "t-1", Base: "main", Branch: "herd/t-1", Diff: diff}
	c.tasks.events["t-1"] = []herd.Event{{ID: 3, Kind: herd.EventTaskReview, Message: hostile, Data: map[string]any{"task": "t-1"}}}
	c.tasks.mu.Unlock()

	get := func(path string) []byte {
		t.Helper()
		req, _ := http.NewRequest("GET", c.url+path, nil)
		req.Header.Set("Authorization", "Bearer the-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("[%s] expected 200 JSON, not sniffed … got %d %q %q", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		if strings.ContainsAny(string(b), "<>") {
			t.Errorf("[%s] expected no raw markup in the JSON … got %s", path, b)
		}
		return b
	}
	var list []herd.Task
	json.Unmarshal(get("/api/v1/tasks"), &list)
	if len(list) != 1 || list[0].Title != hostile || list[0].Prompt != task.Prompt {
		t.Errorf("[list] expected the title and prompt intact … got %+v", list)
	}
	var d api.TaskDetail
	json.Unmarshal(get("/api/v1/tasks/t-1"), &d)
	if d.Title != hostile || d.Prompt != task.Prompt || d.CheckTail != hostile || d.Reason != hostile || len(d.Events) != 1 || d.Events[0].Message != hostile {
		t.Errorf("[task] expected every field intact … got %+v", d)
	}
	var df api.TaskDiff
	json.Unmarshal(get("/api/v1/tasks/t-1/diff"), &df)
	if df.Diff != diff {
		t.Errorf("[diff] expected the diff intact … got %q", df.Diff)
	}
}
