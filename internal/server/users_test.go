package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"herd/internal/api"
	"herd/internal/store"
	"herd/internal/store/sqlite"
	"herd/internal/users"
)

// awayStore is a shared store that is away.
type awayStore struct{ store.Store }

func (awayStore) Update(context.Context, func(store.Tx) error) error { return store.ErrAway }
func (awayStore) View(context.Context, func(store.Tx) error) error   { return store.ErrAway }

// TestUserRoutes: the routes of herd web user and herd web token answer
// each outcome with its status and words: added, listed, a token shown
// once, refusals (bad name, taken, unknown) and a store away (503).
func TestUserRoutes(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	live := New(Options{Users: users.New(st)}).Handler()
	away := New(Options{Users: users.New(awayStore{})}).Handler()
	none := New(Options{}).Handler()
	for _, c := range []struct {
		name         string
		h            http.Handler
		method, path string
		body         string
		want         int
		says         string
	}{
		{"add", live, "POST", api.UsersPath, `{"name":"alice"}`, 200, `"name":"alice"`},
		{"add read-only", live, "POST", api.UsersPath, `{"name":"rob","read_only":true}`, 200, `"read_only":true`},
		{"add again", live, "POST", api.UsersPath, `{"name":"alice"}`, 409, "user alice exists"},
		{"add a bad name", live, "POST", api.UsersPath, `{"name":"Alice"}`, 400, `user name \"Alice\"`},
		{"add a bad body", live, "POST", api.UsersPath, `{`, 400, "bad request body"},
		{"list", live, "GET", api.UsersPath, "", 200, `[{"name":"alice","read_only":false`},
		{"token", live, "POST", api.UsersPath + "/rob/token", "", 200, `"user":"rob","read_only":true,"token":"`},
		{"token of nobody", live, "POST", api.UsersPath + "/nobody/token", "", 404, "user nobody not found"},
		{"remove nobody", live, "DELETE", api.UsersPath + "/nobody", "", 404, "user nobody not found"},
		{"remove", live, "DELETE", api.UsersPath + "/alice", "", 200, "user alice removed"},
		{"list after", live, "GET", api.UsersPath, "", 200, `[{"name":"rob"`},
		{"add, store away", away, "POST", api.UsersPath, `{"name":"alice"}`, 503, "the store is away"},
		{"list, store away", away, "GET", api.UsersPath, "", 503, "the store is away"},
		{"token, store away", away, "POST", api.UsersPath + "/alice/token", "", 503, "the store is away"},
		{"remove, store away", away, "DELETE", api.UsersPath + "/alice", "", 503, "the store is away"},
		{"no users", none, "GET", api.UsersPath, "", 503, "not enabled"},
	} {
		w := httptest.NewRecorder()
		c.h.ServeHTTP(w, httptest.NewRequest(c.method, c.path, strings.NewReader(c.body)))
		if w.Code != c.want || !strings.Contains(w.Body.String(), c.says) {
			t.Errorf("[%s] expected %d saying %q … got %d %s", c.name, c.want, c.says, w.Code, w.Body)
		}
	}
	var all []api.User
	w := httptest.NewRecorder()
	live.ServeHTTP(w, httptest.NewRequest("GET", api.UsersPath, nil))
	if err := json.Unmarshal(w.Body.Bytes(), &all); err != nil || len(all) != 1 || all[0].Name != "rob" || !all[0].ReadOnly || all[0].CreatedAt.IsZero() {
		t.Errorf("[list] expected read-only rob, dated … got %+v %v", all, err)
	}
}
