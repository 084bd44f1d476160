// Package mcp is herd's MCP server (herd mcp, over stdio): tools that let
// an agent list, read, type into, wait on, start and stop sessions. Each
// tool is a thin call of the local daemon's API (the verb layer behind
// it), bounded by the guard rails (guard.Decide: checked here first, for
// a friendlier refusal, and again by the daemon, whose answer holds) and
// recorded as an mcp_call event. It never touches the store, a process
// or tmux itself.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd/internal/api"
	"herd/internal/guard"
)

// Daemon is the local daemon's API.
type Daemon interface {
	// Do sends one request and decodes the JSON reply into out.
	Do(ctx context.Context, method, path string, query url.Values, body, out any) error
}

var _ Daemon = (*api.Client)(nil)

// Options configure a Server.
type Options struct {
	Daemon Daemon
	// Caller is the session the server runs in (HERD_SESSION); "" for a
	// client outside herd's agents.
	Caller  string
	Version string
	// Workdir is where run starts a role given no workdir.
	Workdir string
	Log     *slog.Logger
}

// Server is herd's MCP server.
type Server struct {
	o   Options
	srv *sdk.Server
}

// New returns the server with every tool registered.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{o: o}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: "herd", Version: o.Version}, &sdk.ServerOptions{
		Instructions: "herd supervises coding-agent sessions (tmux panes or processes). " +
			"Sessions are named <role>-<index>. list_sessions first; send types a prompt into agents; " +
			"wait blocks until sessions reach a state (running, stopped, ...) or an activity (idle, working, waiting).",
	})
	s.addTools()
	s.addResources()
	return s
}

// Run serves t until the client goes away or ctx ends.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.srv.Run(ctx, t)
}

// policy reads what bounds this call: the daemon's [mcp] table, and the
// calling session's role and what it manages.
func (s *Server) policy(ctx context.Context) (guard.Policy, error) {
	var mp api.MCPPolicy
	if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/mcp", nil, nil, &mp); err != nil {
		return guard.Policy{}, daemonErr(err)
	}
	p := guard.Policy{Roles: mp.Roles, Verbs: mp.Verbs, Caller: s.o.Caller}
	if p.Caller == "" {
		return p, nil
	}
	var v api.SessionView
	if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(p.Caller), nil, nil, &v); err != nil {
		if api.IsNotFound(err) {
			return p, nil // no role known: nothing managed
		}
		return guard.Policy{}, daemonErr(err)
	}
	p.CallerRole = v.Role
	var roles []api.RoleView
	if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/roles", nil, nil, &roles); err != nil {
		return guard.Policy{}, daemonErr(err)
	}
	for _, r := range roles {
		if r.Name == v.Role {
			p.Manages = r.Manages
		}
	}
	return p, nil
}

// record writes the call's mcp_call event; a failure to record is logged,
// never the caller's problem.
func (s *Server) record(ctx context.Context, c api.MCPCall) {
	if done, ok := ctx.Value(recordedKey{}).(*bool); ok {
		*done = true
	}
	c.Session = s.o.Caller
	if err := s.o.Daemon.Do(ctx, http.MethodPost, "/v1/mcp/calls", nil, c, nil); err != nil {
		s.o.Log.Warn("mcp call not recorded", "tool", c.Tool, "err", err)
	}
}

// refusedError is a call the guard rails refused in whole.
type refusedError struct{ why string }

func (e *refusedError) Error() string { return "refused: " + e.why }

// guard decides one target and records a refusal; it returns the error
// the tool answers with.
func (s *Server) guard(ctx context.Context, p guard.Policy, tool string, t guard.Target) error {
	d := guard.Decide(p, tool, t)
	if d.Allow {
		return nil
	}
	name := t.Session
	if name == "" {
		name = "role/" + t.Role
	}
	s.record(ctx, api.MCPCall{Tool: tool, Targets: []string{name}, Refused: []string{name}, Why: d.Why})
	return &refusedError{why: d.Why}
}

// session reads one session's view.
func (s *Server) session(ctx context.Context, name string) (api.SessionView, error) {
	if name == "" {
		return api.SessionView{}, errors.New("no session named: give session, e.g. \"worker-0\" (list_sessions shows them)")
	}
	var v api.SessionView
	if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/sessions/"+url.PathEscape(name), nil, nil, &v); err != nil {
		if api.IsNotFound(err) {
			return v, fmt.Errorf("session %s not found: list_sessions shows the sessions there are", name)
		}
		return v, daemonErr(err)
	}
	return v, nil
}

// sessions reads every session.
func (s *Server) sessions(ctx context.Context) ([]api.SessionView, error) {
	var views []api.SessionView
	if err := s.o.Daemon.Do(ctx, http.MethodGet, "/v1/sessions", nil, nil, &views); err != nil {
		return nil, daemonErr(err)
	}
	return views, nil
}

// daemonErr says what to do when the daemon cannot be reached.
func daemonErr(err error) error {
	if errors.Is(err, api.ErrNoDaemon) {
		return fmt.Errorf("herd's daemon is not running (%v): start it with 'herd daemon'", err)
	}
	return err
}

// roleOf is a target for a session view.
func roleOf(v api.SessionView) guard.Target { return guard.Target{Session: v.Name, Role: v.Role} }
