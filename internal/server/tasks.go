package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"herd"
	"herd/internal/api"
	"herd/internal/errs"
	"herd/internal/guard"
	"herd/internal/store"
	"herd/internal/tasks"
)

// Tasks is the task component as the API uses it (internal/tasks.Manager).
type Tasks interface {
	// Add queues a new task and returns it.
	Add(ctx context.Context, req tasks.AddRequest) (herd.Task, error)
	// Describe returns a task with its events.
	Describe(ctx context.Context, id string) (tasks.Described, error)
	// List returns the tasks f selects, oldest first.
	List(ctx context.Context, f store.TaskFilter) ([]herd.Task, error)
	// Verb carries out verb (cancel, retry, approve, comment, done,
	// blocked) on req.ID and returns the task as it left it.
	Verb(ctx context.Context, verb string, req tasks.VerbRequest) (herd.Task, error)
	// Diff returns a task's change against its base.
	Diff(ctx context.Context, id string) (tasks.Diff, error)
}

// Task request bodies are bounded by their text: JSON escaping can make a
// text up to six times larger (\u0001), as for inject.
const (
	maxTaskBody     = 6*herd.MaxTaskPrompt + 64<<10
	maxTaskVerbBody = 6*tasks.MaxComment + 4<<10
)

// maxBy bounds the name of who acts on a task.
const maxBy = 128

// byAPI is who acts when a request does not say: the socket's caller,
// who is the daemon's own user (the socket is 0600) and no one finer.
const byAPI = "api"

// errNoTasks answers every task route of a daemon without the component.
var errNoTasks = errs.New(errs.Unavailable, "tasks are not enabled in this daemon")

// handleTasks registers the task routes: thin handlers over the task
// component, which owns every rule of a task's life.
func (sv *Server) handleTasks(mux *http.ServeMux) {
	sv.route(mux, "GET /v1/tasks", open, sv.handleTaskList)
	sv.route(mux, "POST /v1/tasks", access{"submit_task", inHandler}, sv.handleTaskAdd)
	sv.route(mux, "GET /v1/tasks/{id}", access{"describe_task", inHandler}, sv.handleTask)
	sv.route(mux, "GET /v1/tasks/{id}/diff", access{"describe_task", inHandler}, sv.handleTaskDiff)
	sv.route(mux, "POST /v1/tasks/{id}/{verb}", access{"", inHandler}, sv.handleTaskVerb)
}

// tasks is the task component, or nil after answering 503 when the
// daemon has none.
func (sv *Server) tasks(w http.ResponseWriter) Tasks {
	if sv.o.Tasks == nil {
		fail(w, errNoTasks)
	}
	return sv.o.Tasks
}

func (sv *Server) handleTaskList(w http.ResponseWriter, r *http.Request) {
	ts := sv.tasks(w)
	if ts == nil {
		return
	}
	f, err := taskFilter(r.URL.Query())
	if err != nil {
		fail(w, err)
		return
	}
	list, err := ts.List(r.Context(), f)
	if err != nil {
		fail(w, err)
		return
	}
	if p, _, confined := sv.caller(r); confined {
		// An agent lists what the read rules let it see.
		seen := make([]herd.Task, 0, len(list))
		for _, t := range list {
			if guard.Decide(p, "list_tasks", guard.Target{Role: t.Role}).Allow {
				seen = append(seen, t)
			}
		}
		list = seen
	}
	if list == nil {
		list = []herd.Task{}
	}
	reply(w, http.StatusOK, list)
}

// taskFilter reads GET /v1/tasks's query: state (repeated or
// comma-separated) and role.
func taskFilter(q url.Values) (store.TaskFilter, error) {
	var f store.TaskFilter
	for _, v := range q["state"] {
		for _, s := range strings.Split(v, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			if !herd.ValidTaskState(s) {
				return f, badf("tasks: state %q is not a task state (want %s)", s, taskStateList())
			}
			if !slices.Contains(f.States, herd.TaskState(s)) {
				f.States = append(f.States, herd.TaskState(s))
			}
		}
	}
	if role := q.Get("role"); role != "" {
		if !herd.ValidRoleName(role) {
			return f, badf("tasks: role %q is not a role name", role)
		}
		f.Role = role
	}
	return f, nil
}

// taskStateList names the task states for an error message.
func taskStateList() string {
	names := make([]string, len(herd.TaskStates))
	for i, s := range herd.TaskStates {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func (sv *Server) handleTaskAdd(w http.ResponseWriter, r *http.Request) {
	ts := sv.tasks(w)
	if ts == nil {
		return
	}
	b, ok := readBody(w, r, "add task", maxTaskBody)
	if !ok {
		return
	}
	var req api.AddTaskRequest
	if err := json.Unmarshal(b, &req); err != nil {
		fail(w, badf("add task: bad request body: %v", err))
		return
	}
	if err := checkAdd(&req); err != nil {
		fail(w, err)
		return
	}
	if p, c, confined := sv.caller(r); confined && !sv.permit(w, r, p, c, "submit_task", guard.Target{Role: req.Role}) {
		return
	}
	answer(w)(ts.Add(r.Context(), tasks.AddRequest(req)))
}

// checkAdd refuses what no task could be made of, and fills By.
func checkAdd(req *api.AddTaskRequest) error {
	switch {
	case req.Role == "":
		return badf("add task: role required")
	case !herd.ValidRoleName(req.Role):
		return badf("add task: role %q is not a role name", req.Role)
	case strings.TrimSpace(req.Prompt) == "":
		return badf("add task: prompt required")
	case len(req.Prompt) > herd.MaxTaskPrompt:
		return badf("add task: prompt is %d bytes, limit %d", len(req.Prompt), herd.MaxTaskPrompt)
	case req.Repo != "" && !filepath.IsAbs(req.Repo):
		return badf("add task: repo %q is not an absolute path", req.Repo)
	case len(req.Check) > 0 && req.Check[0] == "":
		return badf("add task: check: the command is empty")
	}
	by, err := actor(req.By)
	req.By = by
	return err
}

// actor is who acts: the request's own word (herd mcp names its agent's
// session, the console its person), else the socket's caller.
func actor(by string) (string, error) {
	if by == "" {
		return byAPI, nil
	}
	if len(by) > maxBy || !utf8.ValidString(by) || strings.ContainsFunc(by, unicode.IsControl) {
		return "", badf("by: %q is not a name (at most %d bytes, no control characters)", by, maxBy)
	}
	return by, nil
}

func (sv *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	ts := sv.tasks(w)
	if ts == nil {
		return
	}
	id, err := taskID(r)
	if err != nil {
		fail(w, err)
		return
	}
	d, err := ts.Describe(r.Context(), id)
	if err != nil {
		fail(w, err)
		return
	}
	if p, c, confined := sv.caller(r); confined && !sv.permit(w, r, p, c, "describe_task", guard.Target{Role: d.Role}) {
		return
	}
	if d.Events == nil {
		d.Events = []herd.Event{}
	}
	reply(w, http.StatusOK, api.TaskDetail(d))
}

func (sv *Server) handleTaskDiff(w http.ResponseWriter, r *http.Request) {
	ts := sv.tasks(w)
	if ts == nil {
		return
	}
	id, err := taskID(r)
	if err != nil {
		fail(w, err)
		return
	}
	if !sv.permitTask(w, r, ts, id, "describe_task") {
		return
	}
	d, err := ts.Diff(r.Context(), id)
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.TaskDiff(d))
}

func (sv *Server) handleTaskVerb(w http.ResponseWriter, r *http.Request) {
	ts := sv.tasks(w)
	if ts == nil {
		return
	}
	verb := r.PathValue("verb")
	if !slices.Contains(api.TaskVerbs, verb) {
		fail(w, errs.New(errs.NotFound, fmt.Sprintf("tasks: no verb %q (want %s)", verb, strings.Join(api.TaskVerbs, ", "))))
		return
	}
	id, err := taskID(r)
	if err != nil {
		fail(w, err)
		return
	}
	b, ok := readBody(w, r, verb, maxTaskVerbBody)
	if !ok {
		return
	}
	var req api.TaskVerbRequest
	if len(strings.TrimSpace(string(b))) > 0 {
		if err := json.Unmarshal(b, &req); err != nil {
			fail(w, badf("%s: bad request body: %v", verb, err))
			return
		}
	}
	switch {
	case len(req.Text) > tasks.MaxComment:
		fail(w, badf("%s: text is %d bytes, limit %d", verb, len(req.Text), tasks.MaxComment))
		return
	case api.TaskVerbNeedsText(verb) && strings.TrimSpace(req.Text) == "":
		fail(w, badf("%s: text required", verb))
		return
	}
	by, err := actor(req.By)
	if err != nil {
		fail(w, err)
		return
	}
	if !sv.permitTask(w, r, ts, id, taskAction(verb)) {
		return
	}
	answer(w)(ts.Verb(r.Context(), verb, tasks.VerbRequest{ID: id, Text: req.Text, By: by}))
}

// taskID is the task the path names, refused unless it reads t-<n>.
func taskID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if herd.TaskSeq(id) <= 0 {
		return "", badf("%q is not a task id (want t-<n>, e.g. t-3)", id)
	}
	return id, nil
}

// readBody reads r's body, at most limit bytes; it answers 413 (over the
// limit) or 400 itself and reports false when the body cannot be had.
func readBody(w http.ResponseWriter, r *http.Request, what string, limit int64) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		reply(w, http.StatusRequestEntityTooLarge, api.Error{Error: fmt.Sprintf("%s: request body over %d bytes", what, limit)})
		return nil, false
	case err != nil:
		fail(w, badf("%s: read request body: %v", what, err))
		return nil, false
	}
	return b, true
}

// permitTask decides action on task id for a confined caller (the task's
// role; its session for the verbs of an agent's own task).
func (sv *Server) permitTask(w http.ResponseWriter, r *http.Request, ts Tasks, id, action string) bool {
	p, c, confined := sv.caller(r)
	if !confined {
		return true
	}
	d, err := ts.Describe(r.Context(), id)
	if err != nil {
		fail(w, err)
		return false
	}
	return sv.permit(w, r, p, c, action, guard.Target{Session: d.Session, Role: d.Role})
}
