package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"herd"
	"herd/internal/api"
)

// The console's task routes read and act through the daemon's task API
// (TaskBackend): the task component decides what a verb may do in which
// state; the console adds who acts, its checks (guard) and its event.

// taskVerbs are the verbs on a task the console offers: a person's. An
// agent's own (done, blocked) are herd mcp's.
var taskVerbs = []string{api.TaskApprove, api.TaskComment, api.TaskCancel, api.TaskRetry}

// taskQuery are the parameters of GET /api/v1/tasks passed to the API;
// the API checks them.
var taskQuery = []string{"state", "role"}

// maxBy bounds who acts on a task, as the API does (longer is 400 there).
const maxBy = 128

// rawJSON answers raw as it is: the API's own JSON, whose strings are
// escaped for HTML already and which the pages put in as text.
func rawJSON(w http.ResponseWriter, raw json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(raw)
}

func (s *Server) handleTasks(w http.ResponseWriter, r *http.Request) {
	q := url.Values{}
	for _, k := range taskQuery {
		if v, ok := r.URL.Query()[k]; ok {
			q[k] = v
		}
	}
	raw, err := s.o.Backend.Tasks(r.Context(), q)
	if err != nil {
		fail(w, err)
		return
	}
	rawJSON(w, raw)
}

func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	raw, err := s.o.Backend.Task(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	rawJSON(w, raw)
}

func (s *Server) handleTaskDiff(w http.ResponseWriter, r *http.Request) {
	raw, err := s.o.Backend.TaskDiff(r.Context(), r.PathValue("id"))
	if err != nil {
		fail(w, err)
		return
	}
	rawJSON(w, raw)
}

// TaskVerbRequest is the optional body of a task's verb: the text of a
// comment. Who acts is the login (actor), never the body's word.
type TaskVerbRequest struct {
	Text string `json:"text"`
}

func (s *Server) handleTaskVerb(w http.ResponseWriter, r *http.Request) {
	id, verb := r.PathValue("id"), r.PathValue("verb")
	if !slices.Contains(taskVerbs, verb) {
		replyError(w, http.StatusNotFound, fmt.Sprintf("no task verb %s (want %s)", strconv.Quote(verb), strings.Join(taskVerbs, ", ")))
		return
	}
	var in TaskVerbRequest
	if r.ContentLength != 0 {
		if err := decode(r, &in); err != nil {
			fail(w, err)
			return
		}
	}
	ctx := r.Context()
	raw, err := s.o.Backend.TaskVerb(ctx, id, verb, api.TaskVerbRequest{Text: in.Text, By: actor(r)})
	if err != nil {
		fail(w, err)
		return
	}
	// The event goes on the task's session, with the task's own events.
	var t herd.Task
	json.Unmarshal(raw, &t)
	s.record(ctx, t.Session, "", herd.EventConsole, "task_"+verb, fmt.Sprintf("task %s: %s by %s", id, verb, origin(r)),
		map[string]any{"who": principal(r).Who, "by": principal(r).By(), "from": r.RemoteAddr, "task": id, "verb": verb, "bytes": len(in.Text)})
	rawJSON(w, raw)
}

// actor names who acts on a task through the console, as its events
// name them (origin), within the API's bound.
func actor(r *http.Request) string {
	by := origin(r)
	if len(by) > maxBy {
		by = strings.ToValidUTF8(by[:maxBy], "")
	}
	return by
}
