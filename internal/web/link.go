package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"herd"
	"herd/internal/store"
	"herd/internal/web/auth"
)

// LinkRequest asks the daemon, over its unix socket, for a login link.
type LinkRequest struct {
	// ReadOnly: the link logs in with the read scope.
	ReadOnly bool `json:"read_only"`
	// Next is the console path to land on ("/" when empty).
	Next string `json:"next"`
	// User, when set, is the user the link logs in (herd web user add):
	// read-only when the user is, and ended when the user is removed.
	User string `json:"user,omitempty"`
}

// LinkResult is a login link.
type LinkResult struct {
	URL string `json:"url"`
	// Scope the link logs in with.
	Scope string `json:"scope"`
	// User the link logs in, "" for none.
	User string `json:"user,omitempty"`
}

// LinkPath is the daemon API's route that mints login links.
const LinkPath = "/v1/web/link"

// LinkHandler mints login links for `herd web url`. It is served on the
// daemon's unix socket only (mode 0600): whoever can reach it can already
// run every verb.
func (s *Server) LinkHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in LinkRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&in); err != nil && err != io.EOF {
			replyError(w, http.StatusBadRequest, "web: bad request body: "+err.Error())
			return
		}
		if !s.Serving() {
			replyError(w, http.StatusServiceUnavailable, "web: the console is not served (see [web] listen and the daemon's log)")
			return
		}
		scope := auth.ScopeOperate
		if in.ReadOnly {
			scope = auth.ScopeRead
		}
		if in.User == "" {
			replyJSON(w, http.StatusOK, LinkResult{URL: s.LoginURL(scope, in.Next), Scope: scope})
			return
		}
		if s.o.Users == nil {
			replyError(w, http.StatusServiceUnavailable, "web: this console knows no users")
			return
		}
		u, err := s.o.Users.User(r.Context(), in.User)
		if err != nil {
			fail(w, err)
			return
		}
		if u.ReadOnly {
			scope = auth.ScopeRead
		}
		replyJSON(w, http.StatusOK, LinkResult{URL: s.loginURL(s.auth.UserLink(u, scope, in.Next)), Scope: scope, User: u.Name})
	})
}

// StoreRecorder appends the console's events to a store.
type StoreRecorder struct {
	Store store.Store
}

var _ Recorder = StoreRecorder{}

// Record implements Recorder.
func (r StoreRecorder) Record(ctx context.Context, e herd.Event) error {
	return r.Store.Update(ctx, func(tx store.Tx) error { return tx.AppendEvent(&e) })
}
