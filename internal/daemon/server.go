package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/execrt"
	"herd/internal/store"
)

// routes is the daemon's API. Every handler answers from the store or
// from state kept in memory: no handler scans processes.
func (d *Daemon) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", d.handleHealth)
	mux.HandleFunc("GET /v1/sessions", d.handleSessions)
	mux.HandleFunc("GET /v1/sessions/{name}", d.handleSession)
	mux.HandleFunc("GET /v1/sessions/{name}/logs", d.handleLogs)
	mux.HandleFunc("POST /v1/sessions/{name}/stop", d.handleStop)
	mux.HandleFunc("POST /v1/sessions/{name}/resume", d.handleResume)
	mux.HandleFunc("POST /v1/sessions/{name}/archive", d.handleArchive)
	mux.HandleFunc("POST /v1/sessions/{name}/inject", d.handleInject)
	mux.HandleFunc("GET /v1/roles", d.handleRoles)
	mux.HandleFunc("POST /v1/roles", d.handleApply)
	mux.HandleFunc("POST /v1/roles/{name}/scale", d.handleScale)
	mux.HandleFunc("DELETE /v1/roles/{name}", d.handleDeleteRole)
	mux.HandleFunc("GET /v1/events", d.handleEvents)
	mux.HandleFunc("POST /v1/activity", d.handleActivity)
	mux.HandleFunc("POST /v1/reap", d.handleReap)
	return mux
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, store.ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, errNotStopped), errors.Is(err, errUnverified):
		code = http.StatusConflict
	case errors.As(err, new(*badRequest)):
		code = http.StatusBadRequest
	}
	reply(w, code, api.Error{Error: err.Error()})
}

// badRequest is an error in what the client sent.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badf(format string, a ...any) error { return &badRequest{fmt.Sprintf(format, a...)} }

func (d *Daemon) handleHealth(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusOK, api.Health{Version: d.version, PID: os.Getpid(), Host: d.host, BootID: d.bootID})
}

func (d *Daemon) handleSessions(w http.ResponseWriter, r *http.Request) {
	var views []api.SessionView
	err := d.st.View(r.Context(), func(tx store.Tx) error {
		sessions, err := tx.Sessions()
		if err != nil {
			return err
		}
		views = make([]api.SessionView, 0, len(sessions))
		for _, s := range sessions {
			views = append(views, d.view(tx, s))
		}
		return nil
	})
	if err != nil {
		fail(w, err)
		return
	}
	views = append(views, d.unmanagedViews()...)
	reply(w, http.StatusOK, views)
}

// view renders a session; tx is used for the incarnation's pid.
func (d *Daemon) view(tx store.Tx, s herd.Session) api.SessionView {
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
	if s.State.Live() && s.Incarnation != "" {
		if inc, err := tx.Incarnation(s.Incarnation); err == nil {
			v.PID = inc.Identity.PID
			if v.PID == 0 {
				v.PID = inc.Root.PID
			}
		}
	}
	d.decorate(&v)
	return v
}

func (d *Daemon) handleSession(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var det api.SessionDetail
	err := d.st.View(r.Context(), func(tx store.Tx) error {
		s, err := tx.Session(name)
		if err != nil {
			return fmt.Errorf("session %q: %w", name, err)
		}
		det.SessionView = d.view(tx, s)
		det.Snapshot = s.Snapshot
		if inc, err := tx.Incarnation(s.Incarnation); err == nil {
			det.Identity, det.Root = &inc.Identity, &inc.Root
			det.Argv, det.Workdir = inc.Argv, inc.Workdir
		}
		det.RecentEvents, err = tx.Events(store.EventFilter{Session: name, Limit: 20})
		return err
	})
	if err != nil {
		fail(w, err)
		return
	}
	if det.RuntimeKind == herd.RuntimeExec && det.Incarnation != "" {
		_, errPath := d.exec.Paths(name, det.Incarnation)
		if b, err := execrt.ReadTail(errPath, 50); err == nil && len(b) > 0 {
			det.StderrTail = splitLines(b)
		}
	}
	d.describe(&det)
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

func (d *Daemon) handleLogs(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	tail, _ := strconv.Atoi(r.URL.Query().Get("tail"))
	var s herd.Session
	err := d.st.View(r.Context(), func(tx store.Tx) (err error) {
		s, err = tx.Session(name)
		if err != nil {
			return fmt.Errorf("session %q: %w", name, err)
		}
		return nil
	})
	if err != nil {
		fail(w, err)
		return
	}
	var out []byte
	if s.RuntimeKind == herd.RuntimeTmux && s.State.Live() {
		out, err = d.capturePane(r.Context(), name, tail)
		out = tailLines(out, tail)
	} else {
		outPath, _ := d.exec.Paths(name, s.Incarnation)
		out, err = execrt.ReadTail(outPath, tail)
	}
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(out)
}

func (d *Daemon) handleStop(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx, cancel := opCtx(r)
	defer cancel()
	err := d.stop(ctx, stopRequest{Name: name, Reason: herd.ReasonUser, DropReplica: true, Message: "stopped by user"})
	switch {
	case errors.Is(err, errAlreadyStopped):
		reply(w, http.StatusOK, api.Result{Message: fmt.Sprintf("session %s already stopped", name)})
	case errors.Is(err, store.ErrNotFound):
		fail(w, fmt.Errorf("session %q: %w", name, err))
	case err != nil:
		fail(w, err)
	default:
		wake(d.kick)
		reply(w, http.StatusOK, api.Result{Message: fmt.Sprintf("session %s stopped", name)})
	}
}

func (d *Daemon) handleResume(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ctx, cancel := opCtx(r)
	defer cancel()
	if err := d.resume(ctx, name, true, false); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = fmt.Errorf("session %q: %w", name, err)
		}
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: fmt.Sprintf("session %s resumed", name)})
}

func (d *Daemon) handleArchive(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	err := d.st.Update(r.Context(), func(tx store.Tx) error {
		s, err := tx.Session(name)
		if err != nil {
			return fmt.Errorf("session %q: %w", name, err)
		}
		if s.Archived {
			return nil
		}
		s.Archived = true
		if err := tx.PutSession(s); err != nil {
			return err
		}
		return tx.AppendEvent(d.event(s, s.Incarnation, herd.EventActivity, herd.ReasonArchived, "archived by user; the reaper stops it once detached", nil))
	})
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: fmt.Sprintf("session %s archived", name)})
}

func (d *Daemon) handleRoles(w http.ResponseWriter, r *http.Request) {
	var views []api.RoleView
	err := d.st.View(r.Context(), func(tx store.Tx) error {
		roles, err := tx.Roles()
		if err != nil {
			return err
		}
		sessions, err := tx.Sessions()
		if err != nil {
			return err
		}
		views = make([]api.RoleView, 0, len(roles))
		for _, ro := range roles {
			v := api.RoleView{Role: ro}
			for _, s := range sessions {
				if s.Role != ro.Name {
					continue
				}
				if s.State.CountsTowardReplicas() {
					v.Live++
				}
				if s.State == herd.StateRunning {
					v.Ready++
				}
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

// handleApply upserts roles; every role is validated before any is written.
func (d *Daemon) handleApply(w http.ResponseWriter, r *http.Request) {
	var roles []herd.Role
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&roles); err != nil {
		fail(w, badf("apply: bad request body: %v", err))
		return
	}
	if err := d.ApplyRoles(r.Context(), roles); err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: fmt.Sprintf("%d role(s) applied", len(roles))})
}

// ApplyRoles validates every role, then upserts them all in one
// transaction (nothing is half-applied). Restart fields left zero take the
// daemon's [restart] defaults. Failed sessions of an applied role re-arm.
func (d *Daemon) ApplyRoles(ctx context.Context, roles []herd.Role) error {
	seen := map[string]bool{}
	for i, ro := range roles {
		if ro.Restart.InitialBackoff == 0 {
			// Not resolved by the client (herd run): take the daemon's
			// defaults. A resolved role keeps max_restarts = 0 (unlimited).
			ro = config.ResolveRole(ro, d.cfg.Restart)
		}
		if err := config.ValidateRole(ro); err != nil {
			return badf("apply: role %d: %v", i, err)
		}
		if seen[ro.Name] {
			return badf("apply: duplicate role %q", ro.Name)
		}
		seen[ro.Name] = true
		roles[i] = ro
	}
	err := d.st.Update(ctx, func(tx store.Tx) error {
		for _, ro := range roles {
			ro.UpdatedAt = time.Now().UTC()
			if err := tx.PutRole(ro); err != nil {
				return err
			}
			if err := d.resetFailedTx(tx, ro.Name); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		wake(d.kick)
	}
	return err
}

func (d *Daemon) handleScale(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req api.ScaleRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil || req.Replicas < 0 {
		fail(w, badf("scale: replicas must be a number >= 0"))
		return
	}
	if req.Replicas > config.MaxReplicas {
		fail(w, badf("scale: replicas = %d: at most %d per role", req.Replicas, config.MaxReplicas))
		return
	}
	err := d.st.Update(r.Context(), func(tx store.Tx) error {
		ro, err := tx.Role(name)
		if err != nil {
			return fmt.Errorf("role %q: %w", name, err)
		}
		ro.Replicas = req.Replicas
		ro.UpdatedAt = time.Now().UTC()
		if err := tx.PutRole(ro); err != nil {
			return err
		}
		return d.resetFailedTx(tx, name)
	})
	if err != nil {
		fail(w, err)
		return
	}
	wake(d.kick)
	reply(w, http.StatusOK, api.Result{Message: fmt.Sprintf("role %s scaled to %d", name, req.Replicas)})
}

// handleDeleteRole scales the role to zero (so nothing relaunches), stops
// every session through the stop path, then forgets the role, its sessions
// and their crash history. A session that cannot be stopped (its identity
// unverifiable) keeps the role: nothing is forgotten while it may live.
func (d *Daemon) handleDeleteRole(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := opCtx(r)
	defer cancel()
	name := r.PathValue("name")
	var sessions []herd.Session
	err := d.st.Update(ctx, func(tx store.Tx) error {
		ro, err := tx.Role(name)
		if err != nil {
			return fmt.Errorf("role %q: %w", name, err)
		}
		ro.Replicas = 0
		ro.UpdatedAt = time.Now().UTC()
		if err := tx.PutRole(ro); err != nil {
			return err
		}
		all, err := tx.Sessions()
		for _, s := range all {
			if s.Role == name {
				sessions = append(sessions, s)
			}
		}
		return err
	})
	if err != nil {
		fail(w, err)
		return
	}
	var reqs []stopRequest
	for _, s := range sessions {
		if s.State == herd.StateStopped {
			continue
		}
		if s.Host != d.host {
			fail(w, fmt.Errorf("delete role %s: session %s runs on host %s; delete it there", name, s.Name, s.Host))
			return
		}
		reqs = append(reqs, stopRequest{Name: s.Name, Reason: herd.ReasonRoleDeleted})
	}
	var failed []error
	for i, err := range d.stopAll(ctx, reqs) {
		if err != nil && !errors.Is(err, errAlreadyStopped) {
			failed = append(failed, fmt.Errorf("stop %s: %w", reqs[i].Name, err))
		}
	}
	if len(failed) > 0 {
		fail(w, fmt.Errorf("delete role %s: %w (the role is kept, scaled to 0)", name, errors.Join(failed...)))
		return
	}
	stopped := len(reqs)
	err = d.st.Update(ctx, func(tx store.Tx) error {
		all, err := tx.Sessions()
		if err != nil {
			return err
		}
		for _, s := range all {
			if s.Role == name && s.State.Live() {
				return fmt.Errorf("delete role %s: session %s is %s again; retry", name, s.Name, s.State)
			}
		}
		return tx.DeleteRole(name)
	})
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: fmt.Sprintf("role %s deleted (%d session(s) stopped)", name, stopped)})
}

// opCtx is the context of work a request starts that must finish even if
// the client goes away (a stop cut short would read as a crash).
func opCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Minute)
}

func (d *Daemon) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.EventFilter{Session: q.Get("session"), Kind: q.Get("kind")}
	if v := q.Get("since"); v != "" {
		dur, err := time.ParseDuration(v)
		if err != nil {
			fail(w, badf("events: --since: %v", err))
			return
		}
		f.Since = time.Now().Add(-dur)
	}
	f.AfterID, _ = strconv.ParseInt(q.Get("after"), 10, 64)
	f.Limit, _ = strconv.Atoi(q.Get("limit"))
	// wait long-polls: with no new event, the reply waits up to this long.
	wait, _ := time.ParseDuration(q.Get("wait"))
	deadline := time.Now().Add(min(wait, time.Minute))
	for {
		var events []herd.Event
		err := d.st.View(r.Context(), func(tx store.Tx) (err error) {
			events, err = tx.Events(f)
			return err
		})
		if err != nil {
			fail(w, err)
			return
		}
		if len(events) > 0 || time.Now().After(deadline) {
			if events == nil {
				events = []herd.Event{}
			}
			reply(w, http.StatusOK, events)
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// handleInject types text into a tmux session's agent: into the pane herd
// launched for it, never whichever pane a user attached to it made active.
func (d *Daemon) handleInject(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req api.InjectRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&req); err != nil {
		fail(w, badf("inject: bad request body: %v", err))
		return
	}
	var s herd.Session
	var inc herd.Incarnation
	err := d.st.View(r.Context(), func(tx store.Tx) (err error) {
		s, err = tx.Session(name)
		if err != nil {
			return fmt.Errorf("session %q: %w", name, err)
		}
		if s.RuntimeKind != herd.RuntimeTmux || !s.State.Live() {
			return nil
		}
		inc, err = tx.Incarnation(s.Incarnation)
		return err
	})
	if err != nil {
		fail(w, err)
		return
	}
	if s.RuntimeKind != herd.RuntimeTmux || !s.State.Live() {
		fail(w, badf("inject: session %s is not a live tmux session (%s, %s)", name, s.RuntimeKind, s.State))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), d.cfg.Probe.Timeout*4)
	defer cancel()
	pane, err := d.agentPane(ctx, inc)
	if err != nil {
		fail(w, fmt.Errorf("inject: %w", err))
		return
	}
	if err := d.tmuxClient().SendTextPane(ctx, pane, req.Text, req.Enter); err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: fmt.Sprintf("%d bytes sent to %s", len(req.Text), name)})
}
