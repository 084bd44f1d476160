package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"herd"
	"herd/internal/api"
	"herd/internal/slots"
	"herd/internal/store"

	"golang.org/x/sys/unix"
)

// handleVerbs registers the pm2-style verbs: restart, reset, signal,
// rollout.
func (sv *Server) handleVerbs(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/sessions/{name}/restart", sv.handleRestart)
	mux.HandleFunc("POST /v1/roles/{name}/restart", sv.handleRestartRole)
	mux.HandleFunc("POST /v1/restart", sv.handleRestartAll)
	mux.HandleFunc("POST /v1/sessions/{name}/reset", sv.handleReset)
	mux.HandleFunc("POST /v1/sessions/{name}/signal", sv.handleSignal)
	mux.HandleFunc("POST /v1/roles/{name}/rollout", sv.handleRollout)
	mux.HandleFunc("POST /v1/reload", sv.handleReload)
}

// handleReload reads the daemon's config file again (see daemon.Reload).
func (sv *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	if sv.o.Reload == nil {
		fail(w, badf("reload: not supported by this daemon"))
		return
	}
	res, err := sv.o.Reload(r.Context())
	if err != nil {
		fail(w, badf("%v", err))
		return
	}
	reply(w, http.StatusOK, res)
}

// decodeOptional decodes an optional JSON body into v: an empty body
// leaves v as it is.
func decodeOptional(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return err
	}
	return json.Unmarshal(b, v)
}

// parseGrace reads a grace period: "" is the daemon's.
func parseGrace(what, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, badf("%s: --grace %q: want a positive duration such as 10s", what, v)
	}
	if d > time.Hour {
		return 0, badf("%s: --grace %s: at most 1h", what, v)
	}
	return d, nil
}

// verbCtx is opCtx with room for a grace period per session.
func verbCtx(r *http.Request, grace time.Duration, n int) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Minute+time.Duration(n)*grace)
}

func (sv *Server) handleRestart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req api.RestartRequest
	if err := decodeOptional(r, &req); err != nil {
		fail(w, badf("restart: bad request body: %v", err))
		return
	}
	grace, err := parseGrace("restart", req.Grace)
	if err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := verbCtx(r, grace, 1)
	defer cancel()
	inc, err := sv.o.Slots.Restart(ctx, slots.RestartRequest{Name: name, Grace: grace})
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.RestartResult{
		Message:   fmt.Sprintf("session %s restarted (incarnation %s)", name, inc),
		Restarted: []api.Restarted{{Session: name, Incarnation: inc}},
	})
}

func (sv *Server) handleRestartRole(w http.ResponseWriter, r *http.Request) {
	sv.restartMany(w, r, r.PathValue("name"))
}

func (sv *Server) handleRestartAll(w http.ResponseWriter, r *http.Request) {
	sv.restartMany(w, r, "")
}

// restartMany restarts, one after the other, every session of role (of
// every role when ""), skipping those stopped on purpose.
func (sv *Server) restartMany(w http.ResponseWriter, r *http.Request, role string) {
	var req api.RestartRequest
	if err := decodeOptional(r, &req); err != nil {
		fail(w, badf("restart: bad request body: %v", err))
		return
	}
	grace, err := parseGrace("restart", req.Grace)
	if err != nil {
		fail(w, err)
		return
	}
	if role != "" {
		if _, err := sv.roleExists(r.Context(), role); err != nil {
			fail(w, err)
			return
		}
	}
	sessions, err := sv.o.Slots.Sessions(r.Context(), role)
	if err != nil {
		fail(w, err)
		return
	}
	ctx, cancel := verbCtx(r, grace+5*time.Second, len(sessions))
	defer cancel()
	res := api.RestartResult{Restarted: []api.Restarted{}}
	failed := 0
	for _, s := range sessions {
		if s.State == herd.StateStopped {
			continue
		}
		inc, err := sv.o.Slots.Restart(ctx, slots.RestartRequest{Name: s.Name, Grace: grace})
		one := api.Restarted{Session: s.Name, Incarnation: inc}
		if err != nil {
			one.Error = err.Error()
			failed++
		}
		res.Restarted = append(res.Restarted, one)
	}
	what := "all sessions"
	if role != "" {
		what = "role " + role
	}
	res.Message = fmt.Sprintf("%s: %d session(s) restarted", what, len(res.Restarted)-failed)
	if failed > 0 {
		res.Message += fmt.Sprintf(", %d failed", failed)
	}
	reply(w, http.StatusOK, res)
}

// roleExists returns the role, or an error naming it once.
func (sv *Server) roleExists(ctx context.Context, name string) (ro herd.Role, err error) {
	err = sv.st.Store().View(ctx, func(tx store.Tx) error {
		if ro, err = tx.Role(name); err != nil {
			return slots.Named("role", name, err)
		}
		return nil
	})
	return ro, err
}

func (sv *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rearmed, err := sv.o.Slots.Reset(r.Context(), name)
	if err != nil {
		fail(w, err)
		return
	}
	msg := fmt.Sprintf("session %s: crash count reset", name)
	if rearmed {
		msg += "; it was failed and relaunches now"
	}
	reply(w, http.StatusOK, api.Result{Message: msg})
}

// ParseSignal reads a signal as a name (TERM, SIGTERM, term) or a number.
func ParseSignal(v string) (unix.Signal, error) {
	if n, err := strconv.Atoi(v); err == nil {
		if n < 1 || n > 64 {
			return 0, fmt.Errorf("signal %d: want 1 to 64", n)
		}
		return unix.Signal(n), nil
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, fmt.Errorf("signal %q: not a signal name (TERM, HUP, INT, USR1, ...) or number", v)
}

func (sv *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var req api.SignalRequest
	if err := decodeOptional(r, &req); err != nil {
		fail(w, badf("signal: bad request body: %v", err))
		return
	}
	sig, err := ParseSignal(req.Signal)
	if err != nil {
		fail(w, badf("signal %s: %v", name, err))
		return
	}
	pid, err := sv.o.Slots.Signal(r.Context(), name, sig)
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: fmt.Sprintf("%s sent to session %s (pid %d)", unix.SignalName(sig), name, pid)})
}

func (sv *Server) handleRollout(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	req := api.RolloutRequest{MaxUnavailable: 1}
	if err := decodeOptional(r, &req); err != nil {
		fail(w, badf("rollout: bad request body: %v", err))
		return
	}
	var ready time.Duration
	if req.Ready != "" {
		d, err := time.ParseDuration(req.Ready)
		if err != nil || d <= 0 || d > 30*time.Minute {
			fail(w, badf("rollout: --timeout %q: want a positive duration up to 30m", req.Ready))
			return
		}
		ready = d
	}
	var minReady time.Duration
	if req.MinReady != "" {
		d, err := time.ParseDuration(req.MinReady)
		if err != nil || d < 0 || d > 10*time.Minute {
			fail(w, badf("rollout: --min-ready %q: want a duration from 0 to 10m", req.MinReady))
			return
		}
		minReady = d
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Hour)
	defer cancel()
	rep, err := sv.o.Slots.Rollout(ctx, slots.RolloutRequest{Role: name, MaxUnavailable: req.MaxUnavailable, Ready: ready, All: req.All, MinReady: minReady})
	var bad *slots.BadInput
	if err != nil && (errors.As(err, &bad) || len(rep.Replaced) == 0 && len(rep.Left) == 0) {
		fail(w, err)
		return
	}
	res := api.RolloutResult{Replaced: []api.RolloutStep{}, Left: rep.Left}
	for _, st := range rep.Replaced {
		res.Replaced = append(res.Replaced, api.RolloutStep(st))
	}
	switch {
	case err != nil:
		res.Error = err.Error()
		res.Message = fmt.Sprintf("role %s: rollout stopped after %d replaced; %d left outdated", name, len(rep.Replaced), len(rep.Left))
	case len(rep.Replaced) == 0:
		res.Message = fmt.Sprintf("role %s: nothing outdated", name)
	default:
		res.Message = fmt.Sprintf("role %s: rolled out (%d session(s) replaced)", name, len(rep.Replaced))
	}
	reply(w, http.StatusOK, res)
}

// markOutdated sets outdated and outdated_reason on the views of sessions
// that run an older template than their role's, or an agent binary since
// replaced on disk (binary_updated).
func (sv *Server) markOutdated(ctx context.Context, views []api.SessionView) {
	verdicts, err := sv.o.Slots.Outdated(ctx, "")
	if err != nil {
		return // a view without the marker beats no view
	}
	for i := range views {
		if v, ok := verdicts[views[i].Name]; ok {
			views[i].Outdated, views[i].OutdatedReason = true, v.Reason
		}
	}
}
