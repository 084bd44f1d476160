// Package server is herd's HTTP+JSON API over the daemon's unix socket:
// thin handlers over the components' methods.
package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"herd/internal/api"
	"herd/internal/attention"
	"herd/internal/config"
	"herd/internal/prober"
	"herd/internal/reaper"
	"herd/internal/runtime"
	"herd/internal/runtime/execrt"
	"herd/internal/slots"
	"herd/internal/stalls"
	"herd/internal/status"
)

// Options are the components the API serves.
type Options struct {
	Status    *status.Manager
	Slots     *slots.Slots
	Prober    *prober.Prober
	Stalls    *stalls.Stalls
	Attention *attention.Tracker // open escalations and notifications (nil: none)
	// Reaper runs reaper passes.
	Reaper  *reaper.Reaper
	Tmux    runtime.Runtime
	Exec    *execrt.Runtime
	Config  *config.Config
	Version string
	BootID  string
	// Reload reads the daemon's config file again (POST /v1/reload).
	Reload func(ctx context.Context) (api.ReloadResult, error)
}

// Server serves the API.
type Server struct {
	o  Options
	st *status.Manager
	// events wakes the event log's long polls when another host commits
	// events (see WakeEvents).
	events wakeup
}

// New returns the API server; serve its Handler.
func New(o Options) *Server { return &Server{o: o, st: o.Status} }

// handleActivity records an agent hook event sent by `herd hook`.
func (sv *Server) handleActivity(w http.ResponseWriter, r *http.Request) {
	var rep api.ActivityReport
	if err := json.NewDecoder(io.LimitReader(r.Body, stalls.MaxReportBody)).Decode(&rep); err != nil {
		fail(w, badf("activity: bad request body: %v", err))
		return
	}
	msg, err := sv.o.Stalls.ApplyReport(r.Context(), rep, false)
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: msg})
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
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		fail(w, badf("reap: read body: %v", err))
		return
	}
	if len(body) > 0 {
		var b api.ReapRequest
		if err := json.Unmarshal(body, &b); err != nil {
			fail(w, badf("reap: bad request body: %v", err))
			return
		}
		req.DryRun = req.DryRun || b.DryRun
	}
	rep, err := sv.o.Reaper.Pass(r.Context(), reaper.PassOptions{DryRun: req.DryRun})
	if err != nil {
		fail(w, err)
		return
	}
	if !req.DryRun {
		sv.o.Reaper.LogPass(rep)
	}
	reply(w, http.StatusOK, rep)
}
