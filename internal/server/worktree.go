package server

import (
	"net/http"

	"herd/internal/api"
)

// handleWorktrees registers herd worktree prune.
func (sv *Server) handleWorktrees(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/worktrees/prune", sv.handlePrune)
}

// handlePrune removes the kept worktrees of sessions that no longer exist
// (see slots.PruneWorktrees).
func (sv *Server) handlePrune(w http.ResponseWriter, r *http.Request) {
	var req api.PruneRequest
	if err := decodeOptional(r, &req); err != nil {
		fail(w, err)
		return
	}
	res, err := sv.o.Slots.PruneWorktrees(r.Context(), req.Force)
	out := api.PruneResult{Worktrees: []api.WorktreeRemoval{}}
	for _, x := range res {
		out.Worktrees = append(out.Worktrees, api.WorktreeRemoval{
			Session: x.Session, Path: x.Path, Branch: x.Branch, Removed: x.Removed, Reason: x.Reason,
		})
	}
	if err != nil {
		out.Error = err.Error()
	}
	reply(w, http.StatusOK, out)
}
