package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd"
	"herd/internal/api"
	"herd/internal/guard"
	"herd/internal/targets"
)

// Bounds of read_output.
const (
	defaultTailLines = 100
	maxTailLines     = 2000
	defaultMaxBytes  = 16 << 10
	maxMaxBytes      = 256 << 10
)

// ListIn filters list_sessions.
type ListIn struct {
	Role     string `json:"role,omitempty" jsonschema:"only this role's sessions"`
	State    string `json:"state,omitempty" jsonschema:"only sessions in this state: pending, running, stalled, unknown, backoff, crashed, failed, succeeded, stopped"`
	Activity string `json:"activity,omitempty" jsonschema:"only sessions with this activity: working, waiting, idle, blocked, unknown"`
	Host     string `json:"host,omitempty" jsonschema:"only this host's sessions"`
	Selector string `json:"selector,omitempty" jsonschema:"a label selector, e.g. role=worker,state!=stopped (keys: role, state, activity, runtime, host)"`
}

// SessionIn names one session.
type SessionIn struct {
	Session string `json:"session" jsonschema:"the session's name, e.g. worker-0"`
}

// ReadIn asks read_output for a session's output.
type ReadIn struct {
	Session   string `json:"session" jsonschema:"the session's name, e.g. worker-0"`
	TailLines int    `json:"tail_lines,omitempty" jsonschema:"the last lines to return (default 100, at most 2000)"`
	MaxBytes  int    `json:"max_bytes,omitempty" jsonschema:"at most this many bytes, the newest kept (default 16384, at most 262144)"`
	SinceMark int    `json:"since_mark,omitempty" jsonschema:"only lines after this mark (the mark a previous read_output returned)"`
}

// SendIn asks send to type text into sessions.
type SendIn struct {
	Session  string `json:"session,omitempty" jsonschema:"one session, e.g. worker-0"`
	Role     string `json:"role,omitempty" jsonschema:"every session of this role"`
	Selector string `json:"selector,omitempty" jsonschema:"the sessions matching a label selector, e.g. role=worker,activity=idle"`
	Text     string `json:"text" jsonschema:"the text to type; Enter is pressed after it unless no_enter"`
	NoEnter  bool   `json:"no_enter,omitempty" jsonschema:"type the text without pressing Enter"`
	// Multiline: as api.InjectRequest's.
	Multiline bool `json:"multiline,omitempty" jsonschema:"the text has line breaks: paste it as one input (without it, text with a line break is refused)"`
}

// WaitIn asks wait to block until sessions reach a state or an activity.
type WaitIn struct {
	Sessions []string `json:"sessions,omitempty" jsonschema:"the sessions to wait for"`
	Role     string   `json:"role,omitempty" jsonschema:"every session of this role"`
	For      string   `json:"for" jsonschema:"a state (running, stopped, failed, ...) or an activity (idle, working, waiting, blocked)"`
	Timeout  string   `json:"timeout,omitempty" jsonschema:"give up after this long, a Go duration (default 60s, at most 24h)"`
}

// RunIn asks run to declare a role.
type RunIn struct {
	Name     string            `json:"name" jsonschema:"the role's name; its sessions are <name>-<index>"`
	Command  []string          `json:"command" jsonschema:"the agent's argv, e.g. [\"claude\"]"`
	Workdir  string            `json:"workdir,omitempty" jsonschema:"the working directory (default: this server's)"`
	Replicas int               `json:"replicas,omitempty" jsonschema:"how many sessions (default 1)"`
	Runtime  string            `json:"runtime,omitempty" jsonschema:"tmux (default) or exec"`
	Agent    string            `json:"agent,omitempty" jsonschema:"claude, codex, gemini or generic (default: from the command)"`
	Env      map[string]string `json:"env,omitempty" jsonschema:"extra environment"`
}

// ScaleIn asks scale to change a role's replicas.
type ScaleIn struct {
	Role     string `json:"role" jsonschema:"the role"`
	Replicas int    `json:"replicas" jsonschema:"the desired number of sessions"`
}

// addTool registers a tool whose every call is an mcp_call event: one
// that failed before its handler recorded it (bad arguments, a target not
// found, the daemon not answering) is recorded with its error.
func addTool[In, Out any](s *Server, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	sdk.AddTool(s.srv, t, func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		done := new(bool)
		res, out, err := h(context.WithValue(ctx, recordedKey{}, done), req, in)
		if err != nil && !*done {
			s.record(ctx, api.MCPCall{Tool: t.Name, Error: err.Error()})
		}
		return res, out, err
	})
}

// recordedKey marks, in a call's context, that its mcp_call was recorded.
type recordedKey struct{}

func (s *Server) addTools() {
	read := &sdk.ToolAnnotations{ReadOnlyHint: true}
	addTool(s, &sdk.Tool{Name: "list_sessions", Annotations: read,
		Description: "List herd's sessions: name, role, state, activity, host, restarts. Filter by role, state, activity, host or a label selector."}, s.listSessions)
	addTool(s, &sdk.Tool{Name: "describe_session", Annotations: read,
		Description: "One session in detail: state, liveness axes, identity, restarts, last exit, diagnostics and recent events."}, s.describeSession)
	addTool(s, &sdk.Tool{Name: "read_output", Annotations: read,
		Description: "A session's screen (tmux) or the tail of its output (exec), bounded in size. Returns a mark: pass it as since_mark to read only what came after."}, s.readOutput)
	addTool(s, &sdk.Tool{Name: "send",
		Description: "Type text into agents, then Enter: one session, every session of a role, or a selector. Reports each session: delivered, or refused and why."}, s.send)
	addTool(s, &sdk.Tool{Name: "wait", Annotations: read,
		Description: "Block until sessions reach a state or an activity (e.g. for=idle: their turn ended), or a timeout. Returns each session's change and who lags."}, s.wait)
	addTool(s, &sdk.Tool{Name: "run",
		Description: "Declare a role that runs a command as agents (as herd run). Needs run in the daemon's [mcp] verbs."}, s.run)
	addTool(s, &sdk.Tool{Name: "scale",
		Description: "Change how many sessions a role runs. Needs scale in the daemon's [mcp] verbs."}, s.scale)
	for _, v := range []struct{ name, desc string }{
		{"stop", "Stop a session (a resume snapshot is kept; its role runs one replica fewer)."},
		{"restart", "Give a session a fresh incarnation through the stop path."},
		{"resume", "Relaunch a stopped session from its snapshot, continuing its conversation where the agent can."},
	} {
		addTool(s, &sdk.Tool{Name: v.name, Description: v.desc + " Needs " + v.name + " in the daemon's [mcp] verbs."}, s.sessionVerb(v.name))
	}
	s.addTaskTools()
}

// sessionOut is one session as list_sessions shows it.
type sessionOut struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Host     string `json:"host"`
	Runtime  string `json:"runtime"`
	State    string `json:"state"`
	Activity string `json:"activity"`
	Restarts int    `json:"restarts"`
	Outdated bool   `json:"outdated,omitempty"`
	Needs    bool   `json:"needs_attention,omitempty"`
}

func (s *Server) listSessions(ctx context.Context, _ *sdk.CallToolRequest, in ListIn) (*sdk.CallToolResult, any, error) {
	p, err := s.policy(ctx)
	if err != nil {
		return nil, nil, err
	}
	sel := in.Selector
	for k, v := range map[string]string{"state": in.State, "activity": in.Activity, "host": in.Host} {
		if v != "" {
			sel = strings.Trim(sel+","+k+"="+v, ",")
		}
	}
	t := api.Targets{All: true, Role: in.Role, Selector: sel}
	views, err := s.sessions(ctx)
	if err != nil {
		return nil, nil, err
	}
	names, _, err := targets.Resolve(views, t, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("list_sessions: %v", err)
	}
	out := []sessionOut{}
	for _, v := range views {
		if !slices.Contains(names, v.Name) || !guard.Decide(p, "list_sessions", roleOf(v)).Allow {
			continue
		}
		out = append(out, sessionOut{Name: v.Name, Role: v.Role, Host: v.Host, Runtime: v.RuntimeKind, State: string(v.State),
			Activity: string(v.Activity), Restarts: v.Restarts, Outdated: v.Outdated, Needs: v.Attention()})
	}
	s.record(ctx, api.MCPCall{Tool: "list_sessions"})
	return nil, map[string]any{"sessions": out}, nil
}

func (s *Server) describeSession(ctx context.Context, _ *sdk.CallToolRequest, in SessionIn) (*sdk.CallToolResult, any, error) {
	v, _, err := s.target(ctx, "describe_session", in.Session)
	if err != nil {
		return nil, nil, err
	}
	var det api.SessionDetail
	if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(v.Name), nil, nil, &det); err != nil {
		return nil, nil, daemonErr(err)
	}
	s.record(ctx, api.MCPCall{Tool: "describe_session", Targets: []string{v.Name}})
	return nil, det, nil
}

// target reads the session a one-session tool names and applies the guard
// rails to it.
func (s *Server) target(ctx context.Context, tool, name string) (api.SessionView, guard.Policy, error) {
	p, err := s.policy(ctx)
	if err != nil {
		return api.SessionView{}, p, err
	}
	v, err := s.session(ctx, name)
	if err != nil {
		return v, p, err
	}
	if err := s.guard(ctx, p, tool, roleOf(v)); err != nil {
		return v, p, err
	}
	return v, p, nil
}

func (s *Server) readOutput(ctx context.Context, _ *sdk.CallToolRequest, in ReadIn) (*sdk.CallToolResult, any, error) {
	v, _, err := s.target(ctx, "read_output", in.Session)
	if err != nil {
		return nil, nil, err
	}
	tail := clamp(in.TailLines, defaultTailLines, maxTailLines)
	maxBytes := clamp(in.MaxBytes, defaultMaxBytes, maxMaxBytes)
	var raw []byte
	q := url.Values{"tail": {"0"}}
	if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(v.Name)+"/logs", q, nil, &raw); err != nil {
		return nil, nil, daemonErr(err)
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(raw) == 0 {
		lines = nil
	}
	mark := len(lines)
	if in.SinceMark > 0 {
		lines = lines[min(in.SinceMark, len(lines)):]
	}
	truncated := false
	if len(lines) > tail {
		lines, truncated = lines[len(lines)-tail:], true
	}
	text := strings.Join(lines, "\n")
	if len(text) > maxBytes {
		text, truncated = text[len(text)-maxBytes:], true
	}
	s.record(ctx, api.MCPCall{Tool: "read_output", Targets: []string{v.Name}})
	return nil, map[string]any{"session": v.Name, "state": v.State, "activity": v.Activity, "text": text, "mark": mark, "truncated": truncated}, nil
}

func clamp(v, def, hi int) int {
	if v <= 0 {
		return def
	}
	return min(v, hi)
}

func (s *Server) send(ctx context.Context, _ *sdk.CallToolRequest, in SendIn) (*sdk.CallToolResult, any, error) {
	t := api.Targets{Role: in.Role, Selector: in.Selector}
	if in.Session != "" {
		if in.Role != "" || in.Selector != "" {
			return nil, nil, fmt.Errorf("send: give one of session, role or selector")
		}
		t = api.Targets{Names: []string{in.Session}}
	}
	if _, err := targets.Check(t); err != nil {
		return nil, nil, fmt.Errorf("send: %v: give session (e.g. worker-0), role, or selector", err)
	}
	p, err := s.policy(ctx)
	if err != nil {
		return nil, nil, err
	}
	views, err := s.sessions(ctx)
	if err != nil {
		return nil, nil, err
	}
	names, missing, err := targets.Resolve(views, t, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("send: %v", err)
	}
	if len(missing) > 0 {
		return nil, nil, fmt.Errorf("send: session %s not found: list_sessions shows the sessions there are", strings.Join(missing, ", "))
	}
	var allowed, refused []string
	var out []api.Delivery
	var why string
	for _, v := range views {
		if !slices.Contains(names, v.Name) {
			continue
		}
		if d := guard.Decide(p, "send", roleOf(v)); !d.Allow {
			refused, why = append(refused, v.Name), d.Why
			out = append(out, api.Delivery{Session: v.Name, Error: "refused: " + d.Why})
			continue
		}
		allowed = append(allowed, v.Name)
	}
	call := api.MCPCall{Tool: "send", Targets: names, Refused: refused, Why: why}
	if len(allowed) == 0 {
		s.record(ctx, call)
		if len(refused) > 0 {
			return nil, nil, &refusedError{why: why}
		}
		return nil, nil, fmt.Errorf("send: %s names no session", targets.Describe(t))
	}
	var res api.InjectManyResult
	req := api.InjectManyRequest{Targets: api.Targets{Names: allowed}, Text: in.Text, Enter: !in.NoEnter, Multiline: in.Multiline}
	if err := s.o.Daemon.Do(ctx, http.MethodPost, "/v1/inject", nil, req, &res); err != nil {
		call.Error = err.Error()
		s.record(ctx, call)
		return nil, nil, daemonErr(err)
	}
	s.record(ctx, call)
	out = append(res.Deliveries, out...)
	delivered := 0
	for _, d := range out {
		if d.Delivered {
			delivered++
		}
	}
	return nil, map[string]any{"delivered": delivered, "sessions": out}, nil
}

func (s *Server) wait(ctx context.Context, _ *sdk.CallToolRequest, in WaitIn) (*sdk.CallToolResult, any, error) {
	t := api.Targets{Names: in.Sessions, Role: in.Role}
	if _, err := targets.Check(t); err != nil {
		return nil, nil, fmt.Errorf("wait: %v: give sessions or a role", err)
	}
	if in.For == "" {
		return nil, nil, fmt.Errorf("wait: give for: a state (running, stopped, ...) or an activity (idle, working, waiting, blocked)")
	}
	p, err := s.policy(ctx)
	if err != nil {
		return nil, nil, err
	}
	var checks []guard.Target
	for _, n := range in.Sessions {
		v, err := s.session(ctx, n)
		if err != nil {
			return nil, nil, err
		}
		checks = append(checks, roleOf(v))
	}
	if in.Role != "" {
		checks = append(checks, guard.Target{Role: in.Role})
	}
	for _, c := range checks {
		if err := s.guard(ctx, p, "wait", c); err != nil {
			return nil, nil, err
		}
	}
	timeout := in.Timeout
	if timeout == "" {
		timeout = "60s"
	}
	var res api.WaitResult
	req := api.WaitRequest{Targets: t, For: in.For, Timeout: timeout}
	err = s.o.Daemon.Do(ctx, http.MethodPost, "/v1/wait", nil, req, &res)
	call := api.MCPCall{Tool: "wait", Targets: append(append([]string(nil), in.Sessions...), roleTargets(in.Role)...)}
	if err != nil {
		call.Error = err.Error()
	}
	s.record(ctx, call)
	if err != nil {
		return nil, nil, daemonErr(err)
	}
	return nil, res, nil
}

func roleTargets(role string) []string {
	if role == "" {
		return nil
	}
	return []string{"role/" + role}
}

func (s *Server) run(ctx context.Context, _ *sdk.CallToolRequest, in RunIn) (*sdk.CallToolResult, any, error) {
	if in.Name == "" || len(in.Command) == 0 {
		return nil, nil, fmt.Errorf("run: give name and command, e.g. {\"name\": \"worker\", \"command\": [\"claude\"]}")
	}
	p, err := s.policy(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := s.guard(ctx, p, "run", guard.Target{Role: in.Name}); err != nil {
		return nil, nil, err
	}
	role := herd.Role{Name: in.Name, Replicas: max(in.Replicas, 1), Command: in.Command, Workdir: in.Workdir,
		Env: in.Env, Runtime: in.Runtime, Agent: in.Agent}
	if role.Workdir == "" {
		role.Workdir = s.o.Workdir
	}
	var res api.ApplyResult
	err = s.o.Daemon.Do(ctx, http.MethodPost, "/v1/roles", nil, []herd.Role{role}, &res)
	return s.finish(ctx, "run", "role/"+in.Name, res, err)
}

func (s *Server) scale(ctx context.Context, _ *sdk.CallToolRequest, in ScaleIn) (*sdk.CallToolResult, any, error) {
	if in.Role == "" || in.Replicas < 0 {
		return nil, nil, fmt.Errorf("scale: give role and replicas >= 0")
	}
	p, err := s.policy(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := s.guard(ctx, p, "scale", guard.Target{Role: in.Role}); err != nil {
		return nil, nil, err
	}
	var res api.Result
	err = s.o.Daemon.Do(ctx, http.MethodPost, "/v1/roles/"+url.PathEscape(in.Role)+"/scale", nil, api.ScaleRequest{Replicas: in.Replicas}, &res)
	return s.finish(ctx, "scale", "role/"+in.Role+" to "+strconv.Itoa(in.Replicas), res, err)
}

// sessionVerb is stop, restart or resume of one session.
func (s *Server) sessionVerb(verb string) sdk.ToolHandlerFor[SessionIn, any] {
	return func(ctx context.Context, _ *sdk.CallToolRequest, in SessionIn) (*sdk.CallToolResult, any, error) {
		v, _, err := s.target(ctx, verb, in.Session)
		if err != nil {
			return nil, nil, err
		}
		var res map[string]any
		err = s.o.Daemon.Do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(v.Name)+"/"+verb, nil, struct{}{}, &res)
		return s.finish(ctx, verb, v.Name, res, err)
	}
}

// finish records a verb's call and answers with its result or error.
func (s *Server) finish(ctx context.Context, tool, target string, res any, err error) (*sdk.CallToolResult, any, error) {
	call := api.MCPCall{Tool: tool, Targets: []string{target}}
	if err != nil {
		call.Error = err.Error()
	}
	s.record(ctx, call)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", tool, target, daemonErr(err))
	}
	return nil, res, nil
}
