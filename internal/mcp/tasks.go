package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd"
	"herd/internal/api"
	"herd/internal/guard"
)

// SubmitIn asks submit_task for a task.
type SubmitIn struct {
	Role   string `json:"role" jsonschema:"the role whose replicas take the task (its tasks key is true)"`
	Prompt string `json:"prompt" jsonschema:"the work, typed into the agent that takes it"`
	Title  string `json:"title,omitempty" jsonschema:"a one-line title (default: the prompt's first line)"`
	Base   string `json:"base,omitempty" jsonschema:"the branch to start from and land on (default: the repository's current branch)"`
}

// TasksIn filters list_tasks.
type TasksIn struct {
	Role  string `json:"role,omitempty" jsonschema:"only this role's tasks"`
	State string `json:"state,omitempty" jsonschema:"only tasks in this state: queued, assigned, working, needs_you, checking, review, changes, landed, failed, cancelled"`
}

// TaskIn names one task.
type TaskIn struct {
	Task string `json:"task" jsonschema:"the task's id, e.g. t-3"`
}

// NoteIn is what an agent says of its own task.
type NoteIn struct {
	Text string `json:"text" jsonschema:"task_done: a summary of what was done; task_blocked: the question for a person"`
}

func (s *Server) addTaskTools() {
	read := &sdk.ToolAnnotations{ReadOnlyHint: true}
	addTool(s, &sdk.Tool{Name: "submit_task",
		Description: "Queue a task for a role: a replica takes it, works on its own branch, herd runs its check and a person approves it. Needs the role in the caller's manages. Returns the task's id."}, s.submitTask)
	addTool(s, &sdk.Tool{Name: "list_tasks", Annotations: read,
		Description: "List herd's tasks: id, role, state, session, commits, title. Filter by role or state."}, s.listTasks)
	addTool(s, &sdk.Tool{Name: "describe_task", Annotations: read,
		Description: "One task in detail: its prompt, state and reason, branch, check output and the events of its story."}, s.describeTask)
	addTool(s, &sdk.Tool{Name: "task_done",
		Description: "Say that your task is done (you committed your work on its branch): herd runs its check. Only for the task your session holds."}, s.taskNote("task_done", "done"))
	addTool(s, &sdk.Tool{Name: "task_blocked",
		Description: "Say that your task is blocked and ask a person a question: the task waits for them. Only for the task your session holds."}, s.taskNote("task_blocked", "blocked"))
}

func (s *Server) submitTask(ctx context.Context, _ *sdk.CallToolRequest, in SubmitIn) (*sdk.CallToolResult, any, error) {
	if in.Role == "" || in.Prompt == "" {
		return nil, nil, fmt.Errorf("submit_task: give role and prompt")
	}
	p, err := s.policy(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := s.guard(ctx, p, "submit_task", guard.Target{Role: in.Role}); err != nil {
		return nil, nil, err
	}
	body := map[string]any{"role": in.Role, "prompt": in.Prompt, "title": in.Title, "base": in.Base, "by": "mcp:" + p.Caller}
	var t herd.Task
	err = s.o.Daemon.Do(ctx, http.MethodPost, "/v1/tasks", nil, body, &t)
	return s.finish(ctx, "submit_task", "role/"+in.Role, taskOut(t), err)
}

// taskOut is a task as the tools show it: without its prompt.
func taskOut(t herd.Task) map[string]any {
	return map[string]any{"id": t.ID, "title": t.Title, "role": t.Role, "state": t.State, "reason": t.Reason,
		"session": t.Session, "branch": t.Branch, "base": t.Base, "commits": t.Commits}
}

func (s *Server) listTasks(ctx context.Context, _ *sdk.CallToolRequest, in TasksIn) (*sdk.CallToolResult, any, error) {
	q := url.Values{}
	if in.Role != "" {
		q.Set("role", in.Role)
	}
	if in.State != "" {
		q.Set("state", in.State)
	}
	var ts []herd.Task
	if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/tasks", q, nil, &ts); err != nil {
		return nil, nil, daemonErr(err)
	}
	p, err := s.policy(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := []map[string]any{}
	for _, t := range ts {
		if guard.Decide(p, "list_tasks", guard.Target{Role: t.Role}).Allow {
			out = append(out, taskOut(t))
		}
	}
	return nil, map[string]any{"tasks": out}, nil
}

func (s *Server) describeTask(ctx context.Context, _ *sdk.CallToolRequest, in TaskIn) (*sdk.CallToolResult, any, error) {
	if herd.TaskSeq(in.Task) == 0 {
		return nil, nil, fmt.Errorf("describe_task: %q is not a task id (t-<n>): list_tasks shows them", in.Task)
	}
	var d map[string]any
	if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(in.Task), nil, nil, &d); err != nil {
		return nil, nil, daemonErr(err)
	}
	p, err := s.policy(ctx)
	if err != nil {
		return nil, nil, err
	}
	role, _ := d["role"].(string)
	if err := s.guard(ctx, p, "describe_task", guard.Target{Role: role}); err != nil {
		return nil, nil, err
	}
	return nil, d, nil
}

// taskNote is task_done or task_blocked: the calling session's own task.
func (s *Server) taskNote(tool, verb string) sdk.ToolHandlerFor[NoteIn, any] {
	return func(ctx context.Context, _ *sdk.CallToolRequest, in NoteIn) (*sdk.CallToolResult, any, error) {
		p, err := s.policy(ctx)
		if err != nil {
			return nil, nil, err
		}
		if err := s.guard(ctx, p, tool, guard.Target{Session: p.Caller, Role: p.CallerRole}); err != nil {
			return nil, nil, err
		}
		var ts []herd.Task
		if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/tasks", url.Values{"role": {p.CallerRole}}, nil, &ts); err != nil {
			return nil, nil, daemonErr(err)
		}
		var held *herd.Task
		for i, t := range ts {
			if t.Session == p.Caller && t.State.Holds() {
				held = &ts[i]
			}
		}
		if held == nil {
			err := fmt.Errorf("%s: session %s holds no task", tool, p.Caller)
			s.record(ctx, apiCall(tool, p.Caller, err))
			return nil, nil, err
		}
		var t herd.Task
		err = s.o.Daemon.Do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(held.ID)+"/"+verb, nil,
			map[string]string{"text": in.Text, "by": "mcp:" + p.Caller}, &t)
		return s.finish(ctx, tool, held.ID, taskOut(t), err)
	}
}

// apiCall is the record of a call that failed before the daemon acted.
func apiCall(tool, target string, err error) api.MCPCall {
	return api.MCPCall{Tool: tool, Targets: []string{target}, Error: err.Error()}
}
