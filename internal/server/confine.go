package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"herd/internal/api"
	"herd/internal/errs"
	"herd/internal/guard"
	"herd/internal/peer"
	"herd/internal/store"
)

// Where a route's target is, for the guard rails.
const (
	onNone    = iota // the action has no target (a person's verb on everything)
	onSession        // the path's {name} is a session
	onRole           // the path's {name} is a role
	inHandler        // the body names the targets: the handler checks them (sv.permit)
)

// Callers tells who calls on the socket.
type Callers interface {
	// Caller returns who calls on ctx's connection; ok is false for a
	// call that came over no connection of the socket (in process).
	Caller(ctx context.Context) (c peer.Caller, ok bool)
}

var _ Callers = (*peer.Finder)(nil)

// access is what a route asks of a caller from inside an agent's process
// tree: the guard's action and where its target is. The zero value is a
// route open to every caller (health, the [mcp] table, listings).
type access struct {
	action string
	on     int
}

var open = access{}

// route registers h behind the guard rails of a: a caller the peer
// identification places inside an agent's tree gets what guard.Decide
// allows it, and a refusal (403, with the reason) otherwise. The user's
// calls, and the daemon's own in process (the console's), pass as ever.
func (sv *Server) route(mux *http.ServeMux, pattern string, a access, h http.HandlerFunc) {
	if a.action == "" || a.on == inHandler {
		mux.HandleFunc(pattern, h)
		return
	}
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		p, c, confined := sv.caller(r)
		if !confined {
			h(w, r)
			return
		}
		var t guard.Target
		switch a.on {
		case onSession:
			name := r.PathValue("name")
			s, err := sv.st.Session(r.Context(), name)
			if errors.Is(err, store.ErrNotFound) {
				h(w, r) // nothing there to act on: the handler says so
				return
			}
			if err != nil {
				fail(w, err)
				return
			}
			t = guard.Target{Session: name, Role: s.Role}
		case onRole:
			t = guard.Target{Role: r.PathValue("name")}
		}
		if !sv.permit(w, r, p, c, a.action, t) {
			return
		}
		h(w, r)
	})
}

// PersonOnly guards a handler the daemon serves on its socket besides the
// API (the console's login links): a verb only a person may call.
func (sv *Server) PersonOnly(action string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, c, confined := sv.caller(r); confined && !sv.permit(w, r, p, c, action, guard.Target{}) {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// caller tells who calls r: confined is false for the user (and for a
// call the daemon makes in process); else p is what bounds the caller.
func (sv *Server) caller(r *http.Request) (p guard.Policy, c peer.Caller, confined bool) {
	if sv.o.Peers == nil {
		return p, c, false
	}
	c, ok := sv.o.Peers.Caller(r.Context())
	if !ok || c.User() {
		return p, c, false
	}
	return sv.policy(r.Context(), c), c, true
}

// policy is what bounds an agent caller: the [mcp] table, and its
// session's role and what that manages.
func (sv *Server) policy(ctx context.Context, c peer.Caller) guard.Policy {
	p := guard.Policy{Unplaced: c.Unplaced}
	if cfg := sv.config(); cfg != nil {
		p.Roles, p.Verbs = cfg.MCP.Roles, cfg.MCP.Verbs
	}
	if c.Session == "" {
		return p
	}
	roles, all, _, err := sv.st.Listing(ctx)
	if err != nil {
		p.Unplaced = "its role cannot be read: " + err.Error()
		return p
	}
	p.Caller = c.Session
	for _, s := range all {
		if s.Name == c.Session {
			p.CallerRole = s.Role
		}
	}
	for _, ro := range roles {
		if ro.Name == p.CallerRole {
			p.Manages = ro.Manages
		}
	}
	return p
}

// permit decides action on t for a confined caller; a refusal is
// answered (403, with what would allow it), logged and recorded as an
// mcp_call event of the calling session, and permit reports false.
func (sv *Server) permit(w http.ResponseWriter, r *http.Request, p guard.Policy, c peer.Caller, action string, t guard.Target) bool {
	d := guard.Decide(p, action, t)
	if d.Allow {
		return true
	}
	sv.refused(w, r, c, action, targetName(t), d.Why)
	return false
}

// refused answers, logs and records a refused call.
func (sv *Server) refused(w http.ResponseWriter, r *http.Request, c peer.Caller, action string, targets []string, why string) {
	sv.log().Warn("api: call from inside an agent refused", "caller", c.Who(), "pid", c.PID, "route", r.Pattern,
		"action", action, "targets", targets, "why", why)
	call := api.MCPCall{Session: c.Session, Tool: action, Targets: targets, Refused: targets, Why: why}
	if _, err := sv.recordCall(r.Context(), call, c, r.Pattern); err != nil {
		sv.log().Warn("api: refusal not recorded", "caller", c.Who(), "err", err)
	}
	fail(w, errs.New(errs.Forbidden, fmt.Sprintf("refused: %s", why)))
}

// targetName names a target as an mcp_call event does.
func targetName(t guard.Target) []string {
	switch {
	case t.Session != "":
		return []string{t.Session}
	case t.Role != "":
		return []string{"role/" + t.Role}
	}
	return nil
}

// taskAction is the guard's action of a task verb.
func taskAction(verb string) string {
	switch verb {
	case api.TaskDone:
		return "task_done"
	case api.TaskBlocked:
		return "task_blocked"
	case api.TaskApprove:
		return guard.ActionApprove
	case api.TaskCancel:
		return guard.ActionCancel
	case api.TaskRetry:
		return guard.ActionRetry
	case api.TaskComment:
		return guard.ActionComment
	}
	return verb // unknown: guard.Decide refuses it
}

// permitViews decides action on each of views for a confined caller:
// allowed are the names it may act on; refused, each with its reason,
// the others (why is the last reason).
func permitViews(p guard.Policy, action string, views []api.SessionView, names []string) (allowed, refused []string, why string) {
	roles := make(map[string]string, len(views))
	for _, v := range views {
		roles[v.Name] = v.Role
	}
	for _, n := range names {
		if d := guard.Decide(p, action, guard.Target{Session: n, Role: roles[n]}); !d.Allow {
			refused, why = append(refused, n), d.Why
			continue
		}
		allowed = append(allowed, n)
	}
	return allowed, refused, why
}

// permitRead decides a confined caller's read of session name (one that
// does not exist is left to the handler to say so).
func (sv *Server) permitRead(w http.ResponseWriter, r *http.Request, action, name string) bool {
	p, c, confined := sv.caller(r)
	if !confined {
		return true
	}
	s, err := sv.st.Session(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		return true
	}
	if err != nil {
		fail(w, err)
		return false
	}
	return sv.permit(w, r, p, c, action, guard.Target{Session: name, Role: s.Role})
}
