package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"herd"
	"herd/internal/api"
	"herd/internal/config"
	"herd/internal/peer"
	"herd/internal/prober"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/store/sqlite"
	"herd/internal/verbs"
)

// fixedCaller is the peer identification: every request's caller is c
// (ok false: a call in process).
type fixedCaller struct {
	c  peer.Caller
	ok bool
}

func (f fixedCaller) Caller(context.Context) (peer.Caller, bool) { return f.c, f.ok }

// confineServer is an API over a store of roles lead (manages worker),
// worker and review, one session each, with [mcp] verbs = [stop], whose
// every caller is c.
func confineServer(t *testing.T, c Callers) (*Server, store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "herd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.Update(context.Background(), func(tx store.Tx) error {
		for _, r := range []herd.Role{{Name: "lead", Manages: []string{"worker"}}, {Name: "worker"}, {Name: "review"}} {
			r.Replicas, r.Command, r.Workdir, r.Runtime = 1, []string{"agent"}, "/", herd.RuntimeExec
			if err := tx.PutRole(r); err != nil {
				return err
			}
			if err := tx.PutSession(herd.Session{Name: r.Name + "-0", Role: r.Name, Host: "h", State: herd.StateRunning,
				Incarnation: "inc-" + r.Name, RuntimeKind: herd.RuntimeExec}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{}
	cfg.MCP.Verbs = []string{"stop"}
	sv := New(Options{Status: status.New(st, "h", herd.RestartPolicy{}, slog.New(slog.DiscardHandler)), Config: cfg,
		Verbs: verbs.New(verbs.Options{Host: "h"}), Tasks: &fakeTasks{}, Peers: c, Prober: &prober.Prober{}})
	return sv, st
}

// guarded serves one request and returns its status and body; a handler
// that fails past the guard (nothing stands behind the verbs here) counts
// as let through (status 0).
func guarded(h http.Handler, method, path, body string) (code int, out string) {
	defer func() {
		if r := recover(); r != nil {
			code, out = 0, fmt.Sprint("let through: ", r)
		}
	}()
	return serveOne(h, method, path, body)
}

// TestRoutesConfineAgents: every route of the socket, called by agent
// lead-0 (role lead manages worker; [mcp] verbs = [stop]): refused (403,
// with what would allow it) or let through as the guard rails say; an
// agent herd cannot place only reads; the user, and a call in process,
// are never refused. (POST /v1/inject reads every view, the prober's and
// the rollouts' too: e2e's TestAgentsConfinedByDaemon has it refused.)
func TestRoutesConfineAgents(t *testing.T) {
	lead := fixedCaller{c: peer.Caller{PID: 42, Session: "lead-0", Incarnation: "inc-lead"}, ok: true}
	unplaced := fixedCaller{c: peer.Caller{PID: 43, Unplaced: "incarnation x is not live on record"}, ok: true}
	user := fixedCaller{c: peer.Caller{PID: 44}, ok: true}
	inProcess := fixedCaller{}
	const ok = ""
	cases := []struct {
		who                Callers
		method, path, body string
		refused            string // "" let through, else what the 403 says
	}{
		{lead, "POST", "/v1/sessions/review-0/stop", "", `lead-0 may not stop session review-0 (role review): role lead manages [worker] (add "review" to its manages key)`},
		{lead, "POST", "/v1/sessions/worker-0/stop", "", ok},
		{lead, "POST", "/v1/sessions/lead-0/stop", "", "calling session itself"},
		{lead, "POST", "/v1/sessions/worker-0/restart", "", "[mcp] verbs does not list it"},
		{lead, "POST", "/v1/sessions/worker-0/resume", "", "[mcp] verbs does not list it"},
		{lead, "POST", "/v1/sessions/review-0/inject", `{"text":"hi"}`, "lead-0 may not send session review-0"},
		{lead, "POST", "/v1/sessions/worker-0/inject", `{"text":"hi"}`, ok},
		{lead, "POST", "/v1/sessions/worker-0/signal", `{"signal":"KILL"}`, "signal is a person's verb"},
		{lead, "POST", "/v1/sessions/worker-0/archive", "", "archive is a person's verb"},
		{lead, "POST", "/v1/sessions/worker-0/reset", "", "reset is a person's verb"},
		{lead, "DELETE", "/v1/roles/worker", "", "delete_role is a person's verb"},
		{lead, "POST", "/v1/restart", "", "restart_all is a person's verb"},
		{lead, "POST", "/v1/roles/worker/restart", "", "[mcp] verbs does not list it"},
		{lead, "POST", "/v1/roles/worker/rollout", "", "[mcp] verbs does not list it"},
		{lead, "POST", "/v1/roles/worker/scale", `{"replicas":3}`, "[mcp] verbs does not list it"},
		{lead, "POST", "/v1/roles", `[{"name":"worker","command":["x"]}]`, "[mcp] verbs does not list it"},
		{lead, "POST", "/v1/reap", "", "reap is a person's verb"},
		{lead, "POST", "/v1/reload", "", "reload is a person's verb"},
		{lead, "POST", "/v1/worktrees/prune", "", "worktree_prune is a person's verb"},
		{lead, "POST", "/v1/wait", `{"names":["review-0"],"for":"idle","timeout":"0s"}`, "lead-0 may not wait session review-0"},
		{lead, "POST", "/v1/wait", `{"role":"review","for":"idle","timeout":"0s"}`, "lead-0 may not wait role review"},
		{lead, "POST", "/v1/activity", `{"session":"worker-0","incarnation":"inc-worker","event":"Stop"}`, "own task or session"},
		{lead, "POST", "/v1/activity", `{"session":"lead-0","incarnation":"inc-other","event":"Stop"}`, "its own incarnation only"},
		{lead, "POST", "/v1/tasks", `{"role":"review","prompt":"p"}`, "lead-0 may not submit_task role review"},
		{lead, "POST", "/v1/tasks", `{"role":"worker","prompt":"p"}`, ok},
		{lead, "POST", "/v1/tasks/t-1/approve", "", "task_approve is a person's verb"},
		{lead, "POST", "/v1/web/users", `{"name":"mallory"}`, "web_user is a person's verb"},
		{lead, "POST", "/v1/web/users/alice/token", "", "web_user is a person's verb"},
		{lead, "DELETE", "/v1/web/users/alice", "", "web_user is a person's verb"},
		{lead, "GET", "/v1/web/users", "", "web_user is a person's verb"},
		{lead, "POST", "/v1/tasks/t-1/done", `{"text":"x"}`, "own task or session"},
		{lead, "GET", "/v1/sessions/review-0", "", ok},
		{lead, "GET", "/v1/mcp", "", ok},
		{unplaced, "POST", "/v1/sessions/worker-0/inject", `{"text":"hi"}`, "herd cannot tell which of its agents calls (incarnation x is not live on record)"},
		{unplaced, "POST", "/v1/sessions/worker-0/signal", "", "an agent herd runs may not signal"},
		{unplaced, "GET", "/v1/sessions/worker-0", "", ok},
		{user, "POST", "/v1/sessions/review-0/signal", `{"signal":"KILL"}`, ok},
		{user, "POST", "/v1/reload", "", ok},
		{inProcess, "DELETE", "/v1/roles/review", "", ok},
	}
	servers := map[Callers]http.Handler{}
	for _, tc := range cases {
		h, made := servers[tc.who]
		if !made {
			sv, _ := confineServer(t, tc.who)
			h = sv.Handler()
			servers[tc.who] = h
		}
		name := fmt.Sprintf("%s %s %s", tc.who.(fixedCaller).c.Who(), tc.method, tc.path)
		code, out := guarded(h, tc.method, tc.path, tc.body)
		var e api.Error
		if json.Unmarshal([]byte(out), &e) == nil && e.Error != "" {
			out = e.Error
		}
		switch {
		case tc.refused == "" && code == http.StatusForbidden:
			t.Errorf("[%s] expected let through, got 403 %s", name, out)
		case tc.refused != "" && (code != http.StatusForbidden || !strings.Contains(out, tc.refused)):
			t.Errorf("[%s] expected 403 saying %q, got %d %s", name, tc.refused, code, out)
		}
	}
}

// TestRefusalRecorded: a refusal is an mcp_call event of the calling
// session, reason mcp_refused, with the route and the reason.
func TestRefusalRecorded(t *testing.T) {
	sv, st := confineServer(t, fixedCaller{c: peer.Caller{PID: 42, Session: "lead-0", Incarnation: "inc-lead"}, ok: true})
	if code, out := serveOne(sv.Handler(), "POST", "/v1/sessions/review-0/stop", ""); code != http.StatusForbidden {
		t.Fatalf("expected 403, got %d %s", code, out)
	}
	var evs []herd.Event
	err := st.View(context.Background(), func(tx store.Tx) (err error) {
		evs, err = tx.Events(store.EventFilter{Kind: herd.EventMCPCall})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 {
		t.Fatalf("expected one mcp_call event, got %+v", evs)
	}
	ev := evs[0]
	if ev.Session != "lead-0" || ev.Reason != ReasonMCPRefused || ev.Data["route"] != "POST /v1/sessions/{name}/stop" ||
		!strings.Contains(ev.Message, "lead-0 called stop on review-0: refused: lead-0 may not stop") {
		t.Errorf("expected lead-0's refused stop of review-0, got %+v", ev)
	}
}
