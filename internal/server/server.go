package server

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"

	"herd"
	"herd/internal/accounts"
	"herd/internal/api"
	"herd/internal/errs"
	"herd/internal/guard"
	"herd/internal/hosts"
	"herd/internal/runtime/execrt"
	"herd/internal/store"
)

// Handler is the daemon's API. Every handler answers from the store or
// from state kept in memory: no handler scans processes.
func (sv *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	sv.route(mux, "GET /v1/health", open, sv.handleHealth)
	sv.route(mux, "GET /v1/sessions", open, sv.handleSessions)
	sv.route(mux, "GET /v1/sessions/{name}", access{"describe_session", onSession}, sv.handleSession)
	sv.route(mux, "GET /v1/sessions/{name}/logs", access{"read_output", onSession}, sv.handleLogs)
	sv.route(mux, "GET /v1/logs", access{"read_output", inHandler}, sv.handleFleetLogs)
	sv.route(mux, "GET /v1/hosts", open, sv.handleHosts)
	sv.route(mux, "GET /v1/roles", open, sv.handleRoles)
	sv.route(mux, "GET /v1/events", access{"read_output", inHandler}, sv.handleEvents)
	sv.route(mux, "POST /v1/activity", access{guard.ActionHook, inHandler}, sv.handleActivity)
	sv.route(mux, "GET /v1/usage", open, sv.handleUsage)
	sv.handleVerbs(mux)
	sv.handleControl(mux)
	sv.handleMCP(mux)
	sv.handleWorktrees(mux)
	sv.handleTasks(mux)
	sv.handleUsers(mux)
	return mux
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, err error) {
	reply(w, errs.HTTPStatus(err), api.Error{Error: err.Error()})
}

var badf = errs.Badf

func (sv *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	h := api.Health{Version: sv.o.Version, PID: os.Getpid(), Host: sv.st.Host(), BootID: sv.o.BootID}
	if since, away := sv.st.StoreAway(); away {
		h.StoreAwaySince = &since
	}
	reply(w, http.StatusOK, h)
}

func (sv *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	views, err := sv.sessionViews(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	if p, _, confined := sv.caller(r); confined {
		// An agent lists what the read rules let it see.
		seen := make([]api.SessionView, 0, len(views))
		for _, v := range views {
			if guard.Decide(p, "list_sessions", guard.Target{Session: v.Name, Role: v.Role}).Allow {
				seen = append(seen, v)
			}
		}
		views = seen
	}
	replyViews(w, views)
}

// view renders a session as the fleet f sees it (a stale host's live
// sessions are unknown); tx is used for the incarnation's pid.
func (sv *Server) view(tx store.Tx, f hosts.Fleet, s herd.Session) api.SessionView {
	s, _ = f.Mask(s)
	v := baseView(s)
	if s.State.Live() && s.Incarnation != "" {
		if inc, err := tx.Incarnation(s.Incarnation); err == nil {
			v.PID = inc.AgentIdentity().PID
		}
	}
	v.Attached = sv.o.Prober.Last().Attached(v.Name)
	v.Escalated = sv.o.Attention != nil && sv.o.Attention.Escalated(v.Name)
	v.Notified = sv.o.Attention != nil && sv.o.Attention.Notified(v.Name)
	return v
}

// baseView renders what a session's own row says.
func baseView(s herd.Session) api.SessionView {
	v := api.SessionView{
		Name: s.Name, Role: s.Role, Index: s.Index, Host: s.Host, Incarnation: s.Incarnation,
		RuntimeKind: s.RuntimeKind, State: s.State, Runtime: s.Runtime, Process: s.Process,
		Activity: s.Activity, Restarts: s.Restarts, StartedAt: s.StartedAt,
		LastActivityAt: s.LastActivityAt, BackoffUntil: s.BackoffUntil, Exit: s.Exit,
		StateSince: s.StateSince, Archived: s.Archived,
	}
	if v.Activity == "" {
		v.Activity = herd.ActivityUnknown
	}
	return v
}

// unmanagedViews lists herd-named tmux sessions that have no record.
func (sv *Server) unmanagedViews() []api.SessionView {
	var out []api.SessionView
	for _, p := range sv.o.Prober.Unmanaged() {
		out = append(out, api.SessionView{
			Name: p.Session, Host: sv.st.Host(), RuntimeKind: herd.RuntimeTmux, State: herd.StateUnknown,
			Runtime: herd.Alive, Process: herd.Unknown, Activity: herd.ActivityUnknown,
			PID: p.PID, Attached: p.Attached > 0, Unmanaged: true,
		})
	}
	return out
}

func (sv *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var det api.SessionDetail
	err := sv.st.Store().View(r.Context(), func(tx store.Tx) error {
		s, err := tx.Session(name)
		if err != nil {
			return errs.Named("session", name, err)
		}
		f, err := sv.fleet(tx)
		if err != nil {
			return err
		}
		det.SessionView = sv.view(tx, f, s)
		det.Snapshot = s.Snapshot
		if inc, err := tx.Incarnation(s.Incarnation); err == nil {
			det.Identity, det.Root = &inc.Identity, &inc.Root
			det.Argv, det.Workdir = inc.Argv, inc.Workdir
		}
		if role, err := tx.Role(s.Role); err == nil {
			det.Account = accounts.Of(role)
			if role.DailyBudgetUSD > 0 {
				det.Budget = &api.Budget{DailyBudgetUSD: role.DailyBudgetUSD, BudgetHard: role.BudgetHard}
			}
		}
		det.RecentEvents, err = tx.Events(store.EventFilter{Session: name, Limit: 20})
		return err
	})
	if err != nil {
		fail(w, err)
		return
	}
	if det.RuntimeKind == herd.RuntimeExec && det.Incarnation != "" {
		_, errPath := sv.o.Exec.Paths(name, det.Incarnation)
		if b, err := execrt.ReadTail(errPath, 50); err == nil && len(b) > 0 {
			det.StderrTail = splitLines(b)
		}
	}
	one := []api.SessionView{det.SessionView}
	sv.markOutdated(r.Context(), one)
	sv.markWorktrees(r.Context(), one)
	sv.markUsage(r.Context(), one)
	det.SessionView = one[0]
	sv.o.Watchdog.Describe(&det)
	if sv.o.Attention != nil {
		det.Notification = sv.o.Attention.Describe(name)
	}
	reply(w, http.StatusOK, det)
}

// tailLines drops a pane capture's trailing blank lines (the unused rows
// of the pane) and keeps the last n lines (all when n <= 0).
func tailLines(b []byte, n int) []byte {
	lines := splitLines(b)
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 0 {
		return nil
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

func splitLines(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	if start < len(b) {
		out = append(out, string(b[start:]))
	}
	return out
}

func (sv *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	sv.serveLogs(w, r, r.PathValue("name"), "", false)
}

func (sv *Server) handleRoles(w http.ResponseWriter, r *http.Request) {
	var views []api.RoleView
	err := sv.st.Store().View(r.Context(), func(tx store.Tx) error {
		roles, err := tx.Roles()
		if err != nil {
			return err
		}
		sessions, err := tx.Sessions()
		if err != nil {
			return err
		}
		f, err := sv.fleet(tx)
		if err != nil {
			return err
		}
		placed, err := placements(tx, roles)
		if err != nil {
			return err
		}
		views = make([]api.RoleView, 0, len(roles))
		for _, ro := range roles {
			v := api.RoleView{Role: ro, Placement: placed[ro.Name]}
			for _, s := range sessions {
				s, _ = f.Mask(s)
				if s.Role != ro.Name {
					continue
				}
				if v.Hosts == nil {
					v.Hosts = map[string]api.RoleCount{}
				}
				c := v.Hosts[s.Host]
				if s.State.CountsTowardReplicas() {
					v.Live++
					c.Live++
				}
				if s.State == herd.StateRunning {
					v.Ready++
					c.Ready++
				}
				v.Hosts[s.Host] = c
			}
			views = append(views, v)
		}
		return nil
	})
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, views)
}
