// Package server is herd's HTTP+JSON API over the daemon's unix socket:
// thin handlers over the components' methods.
package server

import (
	"context"
	"log/slog"
	"net/http"

	"herd/internal/api"
	"herd/internal/attention"
	"herd/internal/config"
	"herd/internal/guard"
	"herd/internal/prober"
	"herd/internal/roles"
	"herd/internal/runtime"
	"herd/internal/runtime/execrt"
	"herd/internal/status"
	"herd/internal/usage"
	"herd/internal/verbs"
	"herd/internal/watchdog"
	"herd/internal/worktrees"
)

// Options are the components the API serves.
type Options struct {
	Status *status.Manager
	// Roles judges which sessions are outdated.
	Roles *roles.Roles
	// Worktrees gives the worktree status views show and prunes.
	Worktrees *worktrees.Worktrees
	Prober    *prober.Prober
	Watchdog  *watchdog.Watchdog
	Attention *attention.Tracker // open escalations and notifications (nil: none)
	Tmux      runtime.Runtime
	Exec      *execrt.Runtime
	Config    *config.Config
	// Live is the config as reloaded ([mcp] is read from it); nil: Config.
	Live    *config.Live
	Version string
	BootID  string
	// Reload reads the daemon's config file again (POST /v1/reload).
	Reload func(ctx context.Context) (api.ReloadResult, error)
	// Verbs carries out every verb the API serves.
	Verbs *verbs.Verbs
	// Usage is the usage ledger (nil: none; views show zero usage).
	Usage *usage.Ledger
	// Tasks is the task component (nil: none; every task route answers
	// 503).
	Tasks Tasks
	// Users are the console's people (nil: none; every user route
	// answers 503).
	Users Users
	// Peers tells who calls on the socket (a peer.Finder); nil: every
	// caller is the user (no caller is confined).
	Peers Callers
	Log   *slog.Logger
}

// Server serves the API.
type Server struct {
	o  Options
	st *status.Manager
	// events wakes the event log's long polls and the waits when another
	// host commits events (see WakeEvents).
	events wakeup
}

// New returns the API server; serve its Handler.
func New(o Options) *Server { return &Server{o: o, st: o.Status} }

func (sv *Server) log() *slog.Logger {
	if sv.o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return sv.o.Log
}

// handleActivity records an agent hook event sent by `herd hook`.
func (sv *Server) handleActivity(w http.ResponseWriter, r *http.Request) {
	var rep api.ActivityReport
	if err := decodeBody(r, watchdog.MaxReportBody, &rep); err != nil {
		fail(w, badf("activity: bad request body: %v", err))
		return
	}
	if p, c, confined := sv.caller(r); confined {
		// A hook reports about its own session; a launch not yet
		// confirmed reports as its incarnation.
		pending := c.Pending && rep.Incarnation == c.Claimed && rep.Incarnation != ""
		if d := guard.Decide(p, guard.ActionHook, guard.Target{Session: rep.Session}); !d.Allow && !pending {
			sv.refused(w, r, c, guard.ActionHook, []string{rep.Session}, d.Why)
			return
		}
		if c.Incarnation != "" && rep.Incarnation != c.Incarnation {
			sv.refused(w, r, c, guard.ActionHook, []string{rep.Session}, "a hook reports about its own incarnation only ("+c.Incarnation+")")
			return
		}
	}
	msg, err := sv.o.Watchdog.ApplyReport(r.Context(), rep, false)
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: msg})
}
