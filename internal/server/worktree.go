package server

import (
	"context"
	"net/http"
	"time"

	"herd/internal/api"
	"herd/internal/guard"
)

// handleWorktrees registers herd worktree prune.
func (sv *Server) handleWorktrees(mux *http.ServeMux) {
	sv.route(mux, "POST /v1/worktrees/prune", access{guard.ActionPrune, onNone}, sv.handlePrune)
}

// handlePrune removes the kept worktrees of sessions that no longer exist
// (see worktrees.Worktrees.Prune).
func (sv *Server) handlePrune(w http.ResponseWriter, r *http.Request) {
	var req api.PruneRequest
	if err := decodeOptional(r, &req); err != nil {
		fail(w, err)
		return
	}
	res, err := sv.o.Worktrees.Prune(r.Context(), req.Force)
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

// worktreeViewTimeout bounds how long a view waits for worktree status.
const worktreeViewTimeout = 2 * time.Second

// markWorktrees sets the worktree of the views of this host's sessions
// that run in one (cached per tick; a worktree not read in time
// shows null rather than holding up the view).
func (sv *Server) markWorktrees(ctx context.Context, views []api.SessionView) {
	var names []string
	for _, v := range views {
		if v.Host == sv.st.Host() && !v.Unmanaged {
			names = append(names, v.Name)
		}
	}
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, worktreeViewTimeout)
	defer cancel()
	st := sv.o.Worktrees.Status(ctx, names)
	for i := range views {
		if s, ok := st[views[i].Name]; ok {
			views[i].Worktree = &api.Worktree{Path: s.Path, Branch: s.Branch, Dirty: s.Dirty, Ahead: s.Ahead}
		}
	}
}
