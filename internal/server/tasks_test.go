package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
	"herd/internal/api"
	"herd/internal/errs"
	"herd/internal/store"
	"herd/internal/tasks"
)

// fakeTasks is the task component: it records each call and answers
// with err when set.
type fakeTasks struct {
	mu    sync.Mutex
	calls []string
	add   tasks.AddRequest
	list  store.TaskFilter
	verb  tasks.VerbRequest
	err   error
}

var _ Tasks = (*fakeTasks)(nil)

func (f *fakeTasks) called(c string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeTasks) Add(_ context.Context, req tasks.AddRequest) (herd.Task, error) {
	f.called("add")
	f.add = req
	return herd.Task{ID: "t-3", Role: req.Role, State: herd.TaskQueued, Prompt: req.Prompt}, f.err
}

func (f *fakeTasks) Describe(_ context.Context, id string) (tasks.Described, error) {
	f.called("describe " + id)
	return tasks.Described{Task: herd.Task{ID: id, State: herd.TaskReview},
		Events: []herd.Event{{ID: 7, Kind: herd.EventTaskReview, Message: "check passed"}}}, f.err
}

func (f *fakeTasks) List(_ context.Context, flt store.TaskFilter) ([]herd.Task, error) {
	f.called("list")
	f.list = flt
	if f.err != nil {
		return nil, f.err
	}
	return nil, nil
}

func (f *fakeTasks) Verb(_ context.Context, verb string, req tasks.VerbRequest) (herd.Task, error) {
	f.called(verb + " " + req.ID)
	f.verb = req
	return herd.Task{ID: req.ID, State: herd.TaskCancelled}, f.err
}

func (f *fakeTasks) Diff(_ context.Context, id string) (tasks.Diff, error) {
	f.called("diff " + id)
	return tasks.Diff{Task: id, Base: "main", Branch: herd.TaskBranch(id), Diff: "+x\n", Truncated: true}, f.err
}

// do serves one request to h and returns the status and body.
func serveOne(h http.Handler, method, path, body string) (int, string) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, rd))
	return rec.Code, rec.Body.String()
}

// TestTaskRoutes: each route calls the component with what its request
// says and replies with what the component answered.
func TestTaskRoutes(t *testing.T) {
	f := &fakeTasks{}
	h := New(Options{Tasks: f}).Handler()

	code, body := serveOne(h, "GET", "/v1/tasks?state=review,needs_you&state=queued&role=worker", "")
	if code != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("[list] expected 200 [] … got %d %s", code, body)
	}
	want := store.TaskFilter{Role: "worker", States: []herd.TaskState{herd.TaskReview, herd.TaskNeedsYou, herd.TaskQueued}}
	if diff := cmp.Diff(want, f.list); diff != "" {
		t.Errorf("[list] expected the filter … (-want +got):\n%s", diff)
	}

	code, body = serveOne(h, "POST", "/v1/tasks", `{"role":"worker","repo":"/src/app","base":"main","title":"fix","check":["go","test"],"prompt":"fix the flaky test"}`)
	var got herd.Task
	json.Unmarshal([]byte(body), &got)
	if code != 200 || got.ID != "t-3" {
		t.Errorf("[add] expected 200 t-3 … got %d %s", code, body)
	}
	wantAdd := tasks.AddRequest{Role: "worker", Repo: "/src/app", Base: "main", Title: "fix", Check: []string{"go", "test"},
		Prompt: "fix the flaky test", By: "api"}
	if diff := cmp.Diff(wantAdd, f.add); diff != "" {
		t.Errorf("[add] expected the request, By the API's … (-want +got):\n%s", diff)
	}

	code, body = serveOne(h, "GET", "/v1/tasks/t-3", "")
	var det api.TaskDetail
	json.Unmarshal([]byte(body), &det)
	if code != 200 || det.ID != "t-3" || len(det.Events) != 1 || det.Events[0].Kind != herd.EventTaskReview {
		t.Errorf("[describe] expected 200 with the task and its event … got %d %s", code, body)
	}

	code, body = serveOne(h, "GET", "/v1/tasks/t-3/diff", "")
	var d api.TaskDiff
	json.Unmarshal([]byte(body), &d)
	if code != 200 || d.Diff != "+x\n" || !d.Truncated || d.Branch != "herd/t-3" {
		t.Errorf("[diff] expected 200 with the diff … got %d %s", code, body)
	}

	for _, x := range []struct {
		verb, body string
		want       tasks.VerbRequest
	}{
		{"approve", "", tasks.VerbRequest{ID: "t-3", By: "api"}},
		{"cancel", `{}`, tasks.VerbRequest{ID: "t-3", By: "api"}},
		{"retry", `{"text":"try again"}`, tasks.VerbRequest{ID: "t-3", Text: "try again", By: "api"}},
		{"comment", `{"text":"use a mutex","by":"alice"}`, tasks.VerbRequest{ID: "t-3", Text: "use a mutex", By: "alice"}},
		{"done", `{"text":"fixed it","by":"worker-0"}`, tasks.VerbRequest{ID: "t-3", Text: "fixed it", By: "worker-0"}},
		{"blocked", `{"text":"which branch?","by":"worker-0"}`, tasks.VerbRequest{ID: "t-3", Text: "which branch?", By: "worker-0"}},
	} {
		f.verb = tasks.VerbRequest{}
		code, body := serveOne(h, "POST", "/v1/tasks/t-3/"+x.verb, x.body)
		if code != 200 || !strings.Contains(body, `"state":"cancelled"`) {
			t.Errorf("[%s] expected 200 with the task … got %d %s", x.verb, code, body)
		}
		if diff := cmp.Diff(x.want, f.verb); diff != "" {
			t.Errorf("[%s] expected the request … (-want +got):\n%s", x.verb, diff)
		}
	}
}

// TestTaskRequestsRefused: a request no task could be made of is
// refused with a status and a message that says why, before the
// component is called.
func TestTaskRequestsRefused(t *testing.T) {
	long := strings.Repeat("x", tasks.MaxComment+1)
	for _, x := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{"bad state", "GET", "/v1/tasks?state=review,reviewing", "", 400, `state "reviewing" is not a task state (want queued, assigned,`},
		{"bad role", "GET", "/v1/tasks?role=Bad!", "", 400, `role "Bad!" is not a role name`},
		{"bad id", "GET", "/v1/tasks/w-0", "", 400, `"w-0" is not a task id (want t-<n>`},
		{"id t-0", "GET", "/v1/tasks/t-0/diff", "", 400, "is not a task id"},
		{"id with a leading zero", "POST", "/v1/tasks/t-03/cancel", "", 400, "is not a task id"},
		{"missing prompt", "POST", "/v1/tasks", `{"role":"worker","prompt":"  \n"}`, 400, "prompt required"},
		{"missing role", "POST", "/v1/tasks", `{"prompt":"x"}`, 400, "role required"},
		{"relative repo", "POST", "/v1/tasks", `{"role":"w","repo":"src/app","prompt":"x"}`, 400, "not an absolute path"},
		{"prompt over the limit", "POST", "/v1/tasks", `{"role":"w","prompt":"` + strings.Repeat("x", herd.MaxTaskPrompt+1) + `"}`, 400, "limit 1048576"},
		{"not json", "POST", "/v1/tasks", `role=w`, 400, "bad request body"},
		{"a by with a control byte", "POST", "/v1/tasks/t-1/approve", `{"by":"al\u001bice"}`, 400, "is not a name"},
		{"oversized text", "POST", "/v1/tasks/t-1/comment", `{"text":"` + long + `"}`, 400, "text is 65537 bytes, limit 65536"},
		{"comment without text", "POST", "/v1/tasks/t-1/comment", `{"text":" "}`, 400, "comment: text required"},
		{"done without a body", "POST", "/v1/tasks/t-1/done", "", 400, "done: text required"},
		{"body over the bound", "POST", "/v1/tasks/t-1/comment", `{"text":"` + strings.Repeat(long, 7) + `"}`, 413, "request body over"},
		{"unknown verb", "POST", "/v1/tasks/t-1/land", "", 404, `no verb "land" (want approve, comment, cancel, retry, done, blocked)`},
		{"diff is not a verb", "POST", "/v1/tasks/t-1/diff", "", 404, `no verb "diff"`},
	} {
		f := &fakeTasks{}
		h := New(Options{Tasks: f}).Handler()
		code, body := serveOne(h, x.method, x.path, x.body)
		var e api.Error
		json.Unmarshal([]byte(body), &e)
		if code != x.code || !strings.Contains(e.Error, x.want) {
			t.Errorf("[%s] expected %d %q … got %d %.200s", x.name, x.code, x.want, code, body)
		}
		if len(f.calls) > 0 {
			t.Errorf("[%s] expected the component not called … got %v", x.name, f.calls)
		}
	}
}

// TestTaskPromptAtTheLimit: a prompt of the largest size, every byte of
// which JSON escapes, fits the route's bound.
func TestTaskPromptAtTheLimit(t *testing.T) {
	f := &fakeTasks{}
	h := New(Options{Tasks: f}).Handler()
	body, _ := json.Marshal(api.AddTaskRequest{Role: "w", Prompt: strings.Repeat("\x01", herd.MaxTaskPrompt)})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/tasks", bytes.NewReader(body)))
	if rec.Code != 200 || len(f.add.Prompt) != herd.MaxTaskPrompt {
		t.Errorf("expected a %d-byte prompt (%d bytes of JSON) taken … got %d %.200s", herd.MaxTaskPrompt, len(body), rec.Code, rec.Body)
	}
}

// TestTasksDisabled: a daemon without the task component answers every
// task route 503, saying so.
func TestTasksDisabled(t *testing.T) {
	h := New(Options{}).Handler()
	for _, x := range []struct{ method, path, body string }{
		{"GET", "/v1/tasks", ""},
		{"POST", "/v1/tasks", `{"role":"w","prompt":"x"}`},
		{"GET", "/v1/tasks/t-1", ""},
		{"GET", "/v1/tasks/t-1/diff", ""},
		{"POST", "/v1/tasks/t-1/approve", ""},
	} {
		code, body := serveOne(h, x.method, x.path, x.body)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "tasks are not enabled in this daemon") {
			t.Errorf("[%s %s] expected 503 saying tasks are not enabled … got %d %s", x.method, x.path, code, body)
		}
	}
}

// TestTaskErrorKinds: the component's errors become the status their
// kind calls for, its message kept.
func TestTaskErrorKinds(t *testing.T) {
	for _, x := range []struct {
		name string
		err  error
		code int
	}{
		{"conflict", errs.New(errs.Conflict, "task t-1 is landed: nothing to approve"), http.StatusConflict},
		{"not found", &store.NotFoundError{What: "task", Key: "t-1"}, http.StatusNotFound},
		{"bad input", errs.Badf("base %q does not exist", "nope"), http.StatusBadRequest},
		{"anything else", errors.New("disk on fire"), http.StatusInternalServerError},
	} {
		h := New(Options{Tasks: &fakeTasks{err: x.err}}).Handler()
		for _, r := range []struct{ method, path, body string }{
			{"GET", "/v1/tasks", ""},
			{"POST", "/v1/tasks", `{"role":"w","prompt":"x"}`},
			{"GET", "/v1/tasks/t-1", ""},
			{"GET", "/v1/tasks/t-1/diff", ""},
			{"POST", "/v1/tasks/t-1/approve", ""},
		} {
			code, body := serveOne(h, r.method, r.path, r.body)
			var e api.Error
			json.Unmarshal([]byte(body), &e)
			if code != x.code || e.Error != x.err.Error() {
				t.Errorf("[%s: %s %s] expected %d %q … got %d %s", x.name, r.method, r.path, x.code, x.err, code, body)
			}
		}
	}
}

// TestTaskWireTypes: the API's task types encode as the component's
// do, field for field and key for key (the conversions in the handlers
// hold the fields; this holds the tags).
func TestTaskWireTypes(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	task := herd.Task{ID: "t-1", Title: "t", Role: "w", State: herd.TaskReview, Reason: "r", Session: "w-0", Branch: "herd/t-1",
		Base: "main", Repo: "/r", Commits: 2, Check: []string{"make"}, PR: "1", CreatedAt: now, UpdatedAt: now, Prompt: "p",
		Worktree: "/wt", CheckTail: "ok", CheckExit: 1, ApprovedBy: "alice"}
	add := tasks.AddRequest{Role: "w", Repo: "/r", Base: "b", Title: "t", Check: []string{"x"}, Prompt: "p", By: "y"}
	det := tasks.Described{Task: task, Events: []herd.Event{{ID: 1, Time: now, Kind: "task_review"}}}
	diff := tasks.Diff{Task: "t-1", Base: "main", Branch: "herd/t-1", Diff: "d", Truncated: true}
	for _, x := range []struct {
		name         string
		theirs, ours any
	}{
		{"add", add, api.AddTaskRequest(add)},
		{"described", det, api.TaskDetail(det)},
		{"diff", diff, api.TaskDiff(diff)},
	} {
		a, _ := json.Marshal(x.theirs)
		b, _ := json.Marshal(x.ours)
		if !bytes.Equal(a, b) {
			t.Errorf("[%s] expected the same JSON … got\n%s\n%s", x.name, a, b)
		}
	}
}
