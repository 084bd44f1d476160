package server

import (
	"context"
	"net/http"

	"herd/internal/api"
	"herd/internal/errs"
	"herd/internal/guard"
	"herd/internal/store"
)

// Users are the console's people as the API changes them
// (internal/users.Manager).
type Users interface {
	// Add adds a user called name.
	Add(ctx context.Context, name string, readOnly bool) (store.User, error)
	// List lists the users, by name.
	List(ctx context.Context) ([]store.User, error)
	// Remove removes the user called name and every credential of theirs.
	Remove(ctx context.Context, name string) error
	// Token mints a bearer token for the user called name.
	Token(ctx context.Context, name string) (string, store.User, error)
}

// errNoUsers answers the user routes of a daemon built without them.
var errNoUsers = errs.New(errs.Unavailable, "users are not enabled in this daemon")

// handleUsers registers the routes of `herd web user` and `herd web
// token --user`: thin handlers over Users, which owns every rule.
func (sv *Server) handleUsers(mux *http.ServeMux) {
	// The console's people are a person's business: an agent that
	// could add one, or mint a user's token, would hold the console.
	person := access{guard.ActionWebUser, onNone}
	sv.route(mux, "GET "+api.UsersPath, person, sv.handleUserList)
	sv.route(mux, "POST "+api.UsersPath, person, sv.handleUserAdd)
	sv.route(mux, "DELETE "+api.UsersPath+"/{name}", person, sv.handleUserRemove)
	sv.route(mux, "POST "+api.UsersPath+"/{name}/token", person, sv.handleUserToken)
}

// users is the daemon's Users, or nil after answering 503.
func (sv *Server) users(w http.ResponseWriter) Users {
	if sv.o.Users == nil {
		fail(w, errNoUsers)
	}
	return sv.o.Users
}

func userView(u store.User) api.User {
	return api.User{Name: u.Name, ReadOnly: u.ReadOnly, CreatedAt: u.CreatedAt}
}

func (sv *Server) handleUserList(w http.ResponseWriter, r *http.Request) {
	us := sv.users(w)
	if us == nil {
		return
	}
	all, err := us.List(r.Context())
	if err != nil {
		fail(w, err)
		return
	}
	out := make([]api.User, 0, len(all))
	for _, u := range all {
		out = append(out, userView(u))
	}
	reply(w, http.StatusOK, out)
}

func (sv *Server) handleUserAdd(w http.ResponseWriter, r *http.Request) {
	us := sv.users(w)
	if us == nil {
		return
	}
	var in api.AddUserRequest
	if err := decodeBody(r, 4<<10, &in); err != nil {
		fail(w, badf("add user: bad request body: %v", err))
		return
	}
	u, err := us.Add(r.Context(), in.Name, in.ReadOnly)
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, userView(u))
}

func (sv *Server) handleUserRemove(w http.ResponseWriter, r *http.Request) {
	us := sv.users(w)
	if us == nil {
		return
	}
	name := r.PathValue("name")
	if err := us.Remove(r.Context(), name); err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.Result{Message: "user " + name + " removed: their tokens and browser sessions are refused from now on"})
}

func (sv *Server) handleUserToken(w http.ResponseWriter, r *http.Request) {
	us := sv.users(w)
	if us == nil {
		return
	}
	tok, u, err := us.Token(r.Context(), r.PathValue("name"))
	if err != nil {
		fail(w, err)
		return
	}
	reply(w, http.StatusOK, api.UserToken{User: u.Name, ReadOnly: u.ReadOnly, Token: tok})
}
