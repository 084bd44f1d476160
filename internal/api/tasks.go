package api

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"herd"
)

// The verbs on one task: POST /v1/tasks/{id}/{verb}.
const (
	TaskApprove = "approve"
	TaskComment = "comment"
	TaskCancel  = "cancel"
	TaskRetry   = "retry"
	// TaskDone and TaskBlocked are an agent's (herd mcp): its summary,
	// its question.
	TaskDone    = "done"
	TaskBlocked = "blocked"
)

// TaskVerbs lists the verbs on one task.
var TaskVerbs = []string{TaskApprove, TaskComment, TaskCancel, TaskRetry, TaskDone, TaskBlocked}

// TaskVerbNeedsText reports whether verb says nothing without its text
// (a comment, a summary, a question).
func TaskVerbNeedsText(verb string) bool {
	return verb == TaskComment || verb == TaskDone || verb == TaskBlocked
}

// The types below are the task component's (package tasks) as they go
// over the wire. This package does not import it: the component is free
// to use what imports this package (the verbs, the store's users) without
// a cycle. The server converts between the two, so a field added to one
// and not the other does not compile.

// AddTaskRequest is the body of POST /v1/tasks (tasks.AddRequest).
type AddTaskRequest struct {
	Role string `json:"role"`
	// Repo is a directory inside the repository, absolute; "" is the
	// role's workdir.
	Repo string `json:"repo,omitempty"`
	// Base is the branch to start from and land on; "" is the branch
	// checked out in Repo.
	Base  string `json:"base,omitempty"`
	Title string `json:"title,omitempty"`
	// Check replaces the role's check; nil keeps it.
	Check  []string `json:"check,omitempty"`
	Prompt string   `json:"prompt"`
	// By is who asks; "" is the API's caller ("api").
	By string `json:"by,omitempty"`
}

// TaskVerbRequest is the optional body of POST /v1/tasks/{id}/{verb}: the
// text of a comment, done or blocked, and who acts ("" is "api").
type TaskVerbRequest struct {
	Text string `json:"text,omitempty"`
	By   string `json:"by,omitempty"`
}

// TaskDetail is the reply of GET /v1/tasks/{id} (tasks.Described): the
// task and the events that tell its story.
type TaskDetail struct {
	herd.Task
	Events []herd.Event `json:"events"`
}

// TaskDiff is the reply of GET /v1/tasks/{id}/diff (tasks.Diff): the
// task's change against its base.
type TaskDiff struct {
	Task string `json:"task"`
	Base string `json:"base"`
	// Branch is the task's branch; Diff is `git diff base...branch`.
	Branch string `json:"branch"`
	Diff   string `json:"diff"`
	// Truncated: Diff is the first part of a longer diff.
	Truncated bool `json:"truncated"`
}

// TaskPath is the API path of task id, followed by suffix ("" or
// "/diff", "/approve", ...). The id is escaped: a path is never built
// from raw input.
func TaskPath(id, suffix string) string { return "/v1/tasks/" + url.PathEscape(id) + suffix }

// AddTask queues a task and returns it (its id: t-<n>).
func (c *Client) AddTask(ctx context.Context, req AddTaskRequest) (herd.Task, error) {
	var t herd.Task
	err := c.Do(ctx, http.MethodPost, "/v1/tasks", nil, req, &t)
	return t, err
}

// Tasks lists the tasks in any of states (all when none) of role (all
// when ""), oldest first.
func (c *Client) Tasks(ctx context.Context, states []string, role string) ([]herd.Task, error) {
	q := url.Values{}
	if len(states) > 0 {
		q.Set("state", strings.Join(states, ","))
	}
	if role != "" {
		q.Set("role", role)
	}
	var ts []herd.Task
	err := c.Do(ctx, http.MethodGet, "/v1/tasks", q, nil, &ts)
	return ts, err
}

// Task returns task id with its events.
func (c *Client) Task(ctx context.Context, id string) (TaskDetail, error) {
	var d TaskDetail
	err := c.Do(ctx, http.MethodGet, TaskPath(id, ""), nil, nil, &d)
	return d, err
}

// TaskDiff returns task id's change against its base.
func (c *Client) TaskDiff(ctx context.Context, id string) (TaskDiff, error) {
	var d TaskDiff
	err := c.Do(ctx, http.MethodGet, TaskPath(id, "/diff"), nil, nil, &d)
	return d, err
}

// TaskVerb carries out verb (one of TaskVerbs) on task id, with text for
// the verbs that take one, and returns the task as the verb left it.
func (c *Client) TaskVerb(ctx context.Context, verb, id, text string) (herd.Task, error) {
	var t herd.Task
	err := c.Do(ctx, http.MethodPost, TaskPath(id, "/"+url.PathEscape(verb)), nil, TaskVerbRequest{Text: text}, &t)
	return t, err
}
