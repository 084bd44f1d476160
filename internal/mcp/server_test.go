package mcp

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"herd"
	"herd/internal/api"
)

// fakeDaemon answers the API calls the tools make from a fixed fleet and
// records the injects and the mcp_call events.
type fakeDaemon struct {
	mu      sync.Mutex
	policy  api.MCPPolicy
	views   []api.SessionView
	roles   []api.RoleView
	injects []api.InjectManyRequest
	calls   []api.MCPCall
}

func (f *fakeDaemon) Do(_ context.Context, method, path string, _ url.Values, body, out any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var res any
	switch {
	case path == "/v1/mcp":
		res = f.policy
	case path == "/v1/sessions":
		res = f.views
	case path == "/v1/roles":
		res = f.roles
	case strings.HasPrefix(path, "/v1/sessions/"):
		name := strings.TrimPrefix(path, "/v1/sessions/")
		for _, v := range f.views {
			if v.Name == name {
				res = v
			}
		}
		if res == nil {
			return &api.StatusError{Code: 404, Message: "session " + name + " not found"}
		}
	case path == "/v1/inject":
		req := body.(api.InjectManyRequest)
		f.injects = append(f.injects, req)
		var ds []api.Delivery
		for _, n := range req.Names {
			ds = append(ds, api.Delivery{Session: n, Delivered: true})
		}
		res = api.InjectManyResult{Deliveries: ds}
	case path == "/v1/mcp/calls":
		f.calls = append(f.calls, body.(api.MCPCall))
		return nil
	}
	b, _ := json.Marshal(res)
	return json.Unmarshal(b, out)
}

func connect(t *testing.T, d Daemon, caller string) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	s := New(Options{Daemon: d, Caller: caller, Version: "test"})
	go s.Run(t.Context(), st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestSendReportsEachSession(t *testing.T) {
	running := func(name, role string) api.SessionView {
		return api.SessionView{Name: name, Role: role, State: herd.StateRunning, Activity: herd.ActivityIdle, RuntimeKind: "tmux"}
	}
	d := &fakeDaemon{
		policy: api.MCPPolicy{},
		views:  []api.SessionView{running("lead-0", "lead"), running("worker-0", "worker"), running("worker-1", "worker"), running("review-0", "review")},
		roles:  []api.RoleView{{Role: herd.Role{Name: "lead", Manages: []string{"worker"}}}},
	}
	cs := connect(t, d, "lead-0")
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "send", Arguments: map[string]any{"selector": "activity=idle", "text": "go"}})
	if err != nil || res.IsError {
		t.Fatalf("expected a partial delivery, got %+v %v", res, err)
	}
	var out struct {
		Delivered int            `json:"delivered"`
		Sessions  []api.Delivery `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(res.Content[0].(*sdk.TextContent).Text), &out); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range out.Sessions {
		got[s.Session] = s.Error
	}
	if out.Delivered != 2 || got["worker-0"] != "" || got["worker-1"] != "" ||
		!strings.Contains(got["review-0"], "role lead manages [worker]") || !strings.Contains(got["lead-0"], "calling session itself") {
		t.Errorf("expected worker-0 and worker-1 delivered, lead-0 and review-0 refused with why, got %+v", out)
	}
	if len(d.injects) != 1 || strings.Join(d.injects[0].Names, ",") != "worker-0,worker-1" {
		t.Errorf("expected one inject of the managed sessions only, got %+v", d.injects)
	}
	if len(d.calls) != 1 || d.calls[0].Session != "lead-0" || len(d.calls[0].Refused) != 2 {
		t.Errorf("expected one mcp_call of lead-0 naming the 2 refused, got %+v", d.calls)
	}

	// A session outside [mcp] roles is not even listed.
	d.policy.Roles = []string{"worker", "lead"}
	res, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "list_sessions", Arguments: map[string]any{}})
	if err != nil || res.IsError || strings.Contains(res.Content[0].(*sdk.TextContent).Text, "review-0") {
		t.Errorf("expected review-0 hidden by [mcp] roles, got %+v %v", res, err)
	}
	res, err = cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "describe_session", Arguments: map[string]any{"session": "nope-0"}})
	if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "list_sessions shows the sessions there are") {
		t.Errorf("expected a missing session to say what to do, got %+v %v", res, err)
	}
}
