package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"herd/internal/api"
	"herd/internal/guard"
	"herd/internal/verbs"
)

// handleVerbs registers the verbs: each handler decodes its request,
// calls the one verb function (package verbs: forwarded there to another
// host's daemon when the session or role is that host's) and replies.
func (sv *Server) handleVerbs(mux *http.ServeMux) {
	sv.route(mux, "POST /v1/sessions/{name}/stop", access{"stop", onSession}, sv.handleStop)
	sv.route(mux, "POST /v1/sessions/{name}/resume", access{"resume", onSession}, sv.handleResume)
	sv.route(mux, "POST /v1/sessions/{name}/archive", access{guard.ActionArchive, onSession}, sv.handleArchive)
	sv.route(mux, "POST /v1/sessions/{name}/inject", access{"send", onSession}, sv.handleInject)
	sv.route(mux, "POST /v1/sessions/{name}/restart", access{"restart", onSession}, sv.handleRestart)
	sv.route(mux, "POST /v1/sessions/{name}/reset", access{guard.ActionReset, onSession}, sv.handleReset)
	sv.route(mux, "POST /v1/sessions/{name}/signal", access{guard.ActionSignal, onSession}, sv.handleSignal)
	sv.route(mux, "POST /v1/roles", access{"run", inHandler}, sv.handleApply)
	sv.route(mux, "POST /v1/roles/{name}/scale", access{"scale", onRole}, sv.handleScale)
	sv.route(mux, "DELETE /v1/roles/{name}", access{guard.ActionDeleteRole, onRole}, sv.handleDeleteRole)
	sv.route(mux, "POST /v1/roles/{name}/restart", access{"restart", onRole}, sv.handleRestartRole)
	sv.route(mux, "POST /v1/restart", access{guard.ActionRestartAll, onNone}, sv.handleRestartAll)
	sv.route(mux, "POST /v1/roles/{name}/rollout", access{"restart", onRole}, sv.handleRollout)
	sv.route(mux, "POST /v1/reap", access{guard.ActionReap, onNone}, sv.handleReap)
	sv.route(mux, "POST /v1/reload", access{guard.ActionReload, onNone}, sv.handleReload)
}

// answer returns what replies with a verb's result, or its error:
// answer(w)(verb(...)).
func answer(w http.ResponseWriter) func(res any, err error) {
	return func(res any, err error) {
		if err != nil {
			fail(w, err)
			return
		}
		reply(w, http.StatusOK, res)
	}
}

// decodeBody decodes r's JSON body, read up to limit bytes, into v: one
// JSON value and nothing after it but space (a second value would be
// dropped unread, and a request is what it says or is refused).
func decodeBody(r *http.Request, limit int64, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, limit))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
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

func (sv *Server) handleStop(w http.ResponseWriter, r *http.Request) {
	var req api.StopRequest
	if err := decodeOptional(r, &req); err != nil {
		fail(w, badf("stop: bad request body: %v", err))
		return
	}
	answer(w)(sv.o.Verbs.Stop(r.Context(), verbs.StopRequest{Name: r.PathValue("name"), Grace: req.Grace}))
}

func (sv *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	answer(w)(sv.o.Verbs.Resume(r.Context(), verbs.SessionRequest{Name: r.PathValue("name")}))
}

func (sv *Server) handleArchive(w http.ResponseWriter, r *http.Request) {
	answer(w)(sv.o.Verbs.Archive(r.Context(), verbs.SessionRequest{Name: r.PathValue("name")}))
}

func (sv *Server) handleInject(w http.ResponseWriter, r *http.Request) {
	var req api.InjectRequest
	if err := decodeBody(r, maxInjectBody, &req); err != nil {
		fail(w, badf("inject: bad request body: %v", err))
		return
	}
	answer(w)(sv.o.Verbs.Inject(r.Context(), verbs.InjectRequest{Name: r.PathValue("name"), Text: req.Text, Enter: req.Enter, NoClear: req.NoClear,
		Multiline: req.Multiline}))
}

func (sv *Server) handleRestart(w http.ResponseWriter, r *http.Request) {
	var req api.RestartRequest
	if err := decodeOptional(r, &req); err != nil {
		fail(w, badf("restart: bad request body: %v", err))
		return
	}
	answer(w)(sv.o.Verbs.Restart(r.Context(), verbs.RestartRequest{Name: r.PathValue("name"), Grace: req.Grace}))
}

func (sv *Server) handleRestartRole(w http.ResponseWriter, r *http.Request) {
	sv.restartMany(w, r, r.PathValue("name"))
}

func (sv *Server) handleRestartAll(w http.ResponseWriter, r *http.Request) {
	sv.restartMany(w, r, "")
}

func (sv *Server) restartMany(w http.ResponseWriter, r *http.Request, role string) {
	var req api.RestartRequest
	if err := decodeOptional(r, &req); err != nil {
		fail(w, badf("restart: bad request body: %v", err))
		return
	}
	answer(w)(sv.o.Verbs.RestartMany(r.Context(), verbs.RestartManyRequest{Role: role, Grace: req.Grace}))
}

func (sv *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	answer(w)(sv.o.Verbs.Reset(r.Context(), verbs.SessionRequest{Name: r.PathValue("name")}))
}

func (sv *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	var req api.SignalRequest
	if err := decodeOptional(r, &req); err != nil {
		fail(w, badf("signal: bad request body: %v", err))
		return
	}
	answer(w)(sv.o.Verbs.Signal(r.Context(), verbs.SignalRequest{Name: r.PathValue("name"), Signal: req.Signal}))
}

// handleApply upserts roles. The body is a bare array of roles (herd run)
// or an api.ApplyRequest (herd apply: inherited restart keys, dry run).
func (sv *Server) handleApply(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		fail(w, badf("apply: read body: %v", err))
		return
	}
	var req api.ApplyRequest
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '[' {
		err = json.Unmarshal(b, &req.Roles)
	} else {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		fail(w, badf("apply: bad request body: %v", err))
		return
	}
	if p, c, confined := sv.caller(r); confined {
		for _, ro := range req.Roles {
			if !sv.permit(w, r, p, c, "run", guard.Target{Role: ro.Name}) {
				return
			}
		}
	}
	answer(w)(sv.o.Verbs.Apply(r.Context(), verbs.ApplyRequest{Roles: req.Roles, Inherit: req.Inherit, DryRun: req.DryRun}))
}

func (sv *Server) handleScale(w http.ResponseWriter, r *http.Request) {
	var req api.ScaleRequest
	if err := decodeBody(r, 1<<16, &req); err != nil {
		fail(w, badf("scale: bad request body: %v (replicas must be a number >= 0)", err))
		return
	}
	answer(w)(sv.o.Verbs.Scale(r.Context(), verbs.ScaleRequest{Role: r.PathValue("name"), Replicas: req.Replicas}))
}

func (sv *Server) handleDeleteRole(w http.ResponseWriter, r *http.Request) {
	answer(w)(sv.o.Verbs.DeleteRole(r.Context(), verbs.RoleRequest{Role: r.PathValue("name")}))
}

func (sv *Server) handleRollout(w http.ResponseWriter, r *http.Request) {
	req := api.RolloutRequest{MaxUnavailable: 1}
	if err := decodeOptional(r, &req); err != nil {
		fail(w, badf("rollout: bad request body: %v", err))
		return
	}
	answer(w)(sv.o.Verbs.Rollout(r.Context(), verbs.RolloutRequest{Role: r.PathValue("name"),
		MaxUnavailable: req.MaxUnavailable, Ready: req.Ready, MinReady: req.MinReady, All: req.All}))
}

// handleReap runs one reaper pass now, or a dry run (query dry_run=1 or
// body {"dry_run": true}) that decides and reports but changes nothing.
func (sv *Server) handleReap(w http.ResponseWriter, r *http.Request) {
	var req api.ReapRequest
	if v := r.URL.Query().Get("dry_run"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			fail(w, badf("reap: dry_run: %q is not a boolean", v))
			return
		}
		req.DryRun = b
	}
	var body api.ReapRequest
	if err := decodeOptional(r, &body); err != nil {
		fail(w, badf("reap: bad request body: %v", err))
		return
	}
	answer(w)(sv.o.Verbs.Reap(r.Context(), verbs.ReapRequest{DryRun: req.DryRun || body.DryRun}))
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

// markOutdated sets outdated and outdated_reason on the views of sessions
// that run an older template than their role's, or an agent binary since
// replaced on disk (binary_updated).
func (sv *Server) markOutdated(ctx context.Context, views []api.SessionView) {
	verdicts, err := sv.o.Roles.Outdated(ctx, "")
	if err != nil {
		return // a view without the marker beats no view
	}
	for i := range views {
		if v, ok := verdicts[views[i].Name]; ok {
			views[i].Outdated, views[i].OutdatedReason = true, v.Reason
		}
	}
}
