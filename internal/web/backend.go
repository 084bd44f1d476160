package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"herd"
	"herd/internal/api"
)

// Backend reads what the console shows. The daemon's one is its own API
// (APIBackend), so the console lists exactly what `herd get` does.
type Backend interface {
	// Sessions is `herd get sessions -o json`.
	Sessions(ctx context.Context) (json.RawMessage, []api.SessionView, error)
	// Session is `herd describe session NAME -o json`.
	Session(ctx context.Context, name string) (json.RawMessage, error)
	// Screen is the last lines of a session's pane or output; with
	// escapes, a pane's colours are kept as SGR escape sequences (an exec
	// agent's output has its own either way).
	Screen(ctx context.Context, name string, lines int, escapes bool) (string, error)
	// Events lists events after id (of session and kind when set), at
	// most limit (the newest) when limit > 0.
	Events(ctx context.Context, q EventQuery) ([]herd.Event, error)
	// Agents maps each role to its agent kind.
	Agents(ctx context.Context) (map[string]string, error)
	// Usage is `herd usage -o json` for q (by, since, role).
	Usage(ctx context.Context, q url.Values) (json.RawMessage, error)
	TaskBackend
}

// TaskBackend reads and acts on tasks: the daemon's task routes
// (/v1/tasks), whose component owns every rule of a task's life.
type TaskBackend interface {
	// Tasks is `herd get tasks -o json` for q (state, role).
	Tasks(ctx context.Context, q url.Values) (json.RawMessage, error)
	// Task is a task and its events (api.TaskDetail).
	Task(ctx context.Context, id string) (json.RawMessage, error)
	// TaskDiff is a task's change against its base (api.TaskDiff).
	TaskDiff(ctx context.Context, id string) (json.RawMessage, error)
	// TaskVerb carries out verb on task id, as req.By, and returns the
	// task as the verb left it (herd.Task).
	TaskVerb(ctx context.Context, id, verb string, req api.TaskVerbRequest) (json.RawMessage, error)
}

// EventQuery selects events.
type EventQuery struct {
	After   int64
	Session string
	Kind    string
	Limit   int
}

// APIBackend reads through an http.Handler serving herd's API (the
// daemon's, in process: no socket, no second copy of a listing).
type APIBackend struct {
	API http.Handler
}

var _ Backend = APIBackend{}

// buffer is a minimal http.ResponseWriter.
type buffer struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (b *buffer) Header() http.Header         { return b.h }
func (b *buffer) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *buffer) WriteHeader(code int)        { b.code = code }

// get serves one GET and returns its body, or the API's error.
func (a APIBackend) get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	return a.do(ctx, http.MethodGet, path, q, nil)
}

// do serves one request with body (nil: none) as JSON and returns the
// reply's body, or the API's error.
func (a APIBackend) do(ctx context.Context, method, path string, q url.Values, body any) ([]byte, error) {
	u := path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("web: %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	r, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	w := &buffer{h: http.Header{}, code: http.StatusOK}
	a.API.ServeHTTP(w, r)
	if w.code != http.StatusOK {
		var e api.Error
		if json.Unmarshal(w.body.Bytes(), &e) == nil && e.Error != "" {
			return nil, &StatusError{Code: w.code, Message: e.Error}
		}
		return nil, &StatusError{Code: w.code, Message: strings.TrimSpace(w.body.String())}
	}
	return w.body.Bytes(), nil
}

// StatusError is an API error with its HTTP status.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string { return e.Message }

// Sessions implements Backend.
func (a APIBackend) Sessions(ctx context.Context) (json.RawMessage, []api.SessionView, error) {
	b, err := a.get(ctx, "/v1/sessions", nil)
	if err != nil {
		return nil, nil, err
	}
	var views []api.SessionView
	if err := json.Unmarshal(b, &views); err != nil {
		return nil, nil, fmt.Errorf("web: sessions: %w", err)
	}
	return b, views, nil
}

// rawSessions is a Backend that lists the sessions' JSON without decoding
// it: what the event hub compares and /api/v1/sessions serves.
type rawSessions interface {
	SessionsRaw(ctx context.Context) (json.RawMessage, error)
}

var _ rawSessions = APIBackend{}

// SessionsRaw is Sessions without the decoded views.
func (a APIBackend) SessionsRaw(ctx context.Context) (json.RawMessage, error) {
	return a.get(ctx, "/v1/sessions", nil)
}

// sessionsRaw lists the sessions' JSON of b, decoding nothing when b can.
func sessionsRaw(ctx context.Context, b Backend) (json.RawMessage, error) {
	if r, ok := b.(rawSessions); ok {
		return r.SessionsRaw(ctx)
	}
	raw, _, err := b.Sessions(ctx)
	return raw, err
}

// Session implements Backend.
func (a APIBackend) Session(ctx context.Context, name string) (json.RawMessage, error) {
	return a.get(ctx, "/v1/sessions/"+url.PathEscape(name), nil)
}

// Screen implements Backend.
func (a APIBackend) Screen(ctx context.Context, name string, lines int, escapes bool) (string, error) {
	q := url.Values{"tail": {strconv.Itoa(lines)}}
	if escapes {
		q.Set("escapes", "1")
	}
	b, err := a.get(ctx, "/v1/sessions/"+url.PathEscape(name)+"/logs", q)
	return string(b), err
}

// Events implements Backend.
func (a APIBackend) Events(ctx context.Context, q EventQuery) ([]herd.Event, error) {
	v := url.Values{}
	if q.After > 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Session != "" {
		v.Set("session", q.Session)
	}
	if q.Kind != "" {
		v.Set("kind", q.Kind)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	b, err := a.get(ctx, "/v1/events", v)
	if err != nil {
		return nil, err
	}
	var evs []herd.Event
	if err := json.Unmarshal(b, &evs); err != nil {
		return nil, fmt.Errorf("web: events: %w", err)
	}
	return evs, nil
}

// Agents implements Backend.
func (a APIBackend) Agents(ctx context.Context) (map[string]string, error) {
	b, err := a.get(ctx, "/v1/roles", nil)
	if err != nil {
		return nil, err
	}
	var roles []api.RoleView
	if err := json.Unmarshal(b, &roles); err != nil {
		return nil, fmt.Errorf("web: roles: %w", err)
	}
	m := make(map[string]string, len(roles))
	for _, r := range roles {
		m[r.Name] = r.Agent
	}
	return m, nil
}

// Usage implements Backend.
func (a APIBackend) Usage(ctx context.Context, q url.Values) (json.RawMessage, error) {
	return a.get(ctx, "/v1/usage", q)
}

// Tasks implements Backend.
func (a APIBackend) Tasks(ctx context.Context, q url.Values) (json.RawMessage, error) {
	return a.get(ctx, "/v1/tasks", q)
}

// Task implements Backend.
func (a APIBackend) Task(ctx context.Context, id string) (json.RawMessage, error) {
	return a.get(ctx, api.TaskPath(id, ""), nil)
}

// TaskDiff implements Backend.
func (a APIBackend) TaskDiff(ctx context.Context, id string) (json.RawMessage, error) {
	return a.get(ctx, api.TaskPath(id, "/diff"), nil)
}

// TaskVerb implements Backend.
func (a APIBackend) TaskVerb(ctx context.Context, id, verb string, req api.TaskVerbRequest) (json.RawMessage, error) {
	return a.do(ctx, http.MethodPost, api.TaskPath(id, "/"+url.PathEscape(verb)), nil, req)
}
