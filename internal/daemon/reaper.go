package daemon

import (
	"context"
	"net/http"

	"herd/internal/api"
)

// reaperLoop runs a reaper pass every reaper.interval.
func (d *Daemon) reaperLoop(ctx context.Context) { <-ctx.Done() }

// handleReap runs one reaper pass now (or a dry run).
func (d *Daemon) handleReap(w http.ResponseWriter, r *http.Request) {
	reply(w, http.StatusNotImplemented, api.Error{Error: "the reaper is not available yet"})
}
