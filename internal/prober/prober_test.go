package prober

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"herd"
	"herd/internal/runtime/tmux"
)

// TestRuntimeAxis: the runtime axis reads the agent's own pane; a session
// missing beside a row with no session name is unknown, never missing; a
// session missing from two good listings in a row is dead, from one only
// it is re-checked.
func TestRuntimeAxis(t *testing.T) {
	p := New(Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer p.Close()
	user := tmux.Pane{Session: "w-0", PaneID: "%2", PID: 11}
	agent := tmux.Pane{Session: "w-0", PaneID: "%1", PID: 10, Dead: true}
	nameless := tmux.Pane{Err: errors.New("empty session_name")}
	withNameless := tmux.Parse([]tmux.Pane{user, agent, nameless}, nil, 0)

	rt, why := p.runtimeAxis("gone-0", 10, withNameless)
	if rt.Axis != herd.Unknown || rt.MissingOnce || why == "" {
		t.Errorf("[nameless row] expected a missing session unknown … got %+v %q", rt, why)
	}
	if rt, _ = p.runtimeAxis("w-0", 10, withNameless); rt.Axis != herd.Dead {
		t.Errorf("[own pane] expected the agent's dead pane read … got %+v", rt)
	}
	clean := tmux.Parse([]tmux.Pane{user}, nil, 0)
	if rt, _ = p.runtimeAxis("w-1", 20, clean); rt.Axis != herd.Dead || !rt.MissingOnce {
		t.Errorf("[missing once] expected dead, to be re-checked … got %+v", rt)
	}
	if rt, _ = p.runtimeAxis("w-1", 20, clean); rt.Axis != herd.Dead || rt.MissingOnce {
		t.Errorf("[missing twice] expected dead … got %+v", rt)
	}
	p.Launched("w-1")
	if rt, _ = p.runtimeAxis("w-1", 20, clean); !rt.MissingOnce {
		t.Errorf("[relaunched] expected the count to start over … got %+v", rt)
	}
	if rt, why = p.runtimeAxis("w-0", 11, tmux.Parse(nil, errors.New("boom"), 0)); rt.Axis != herd.Unknown || why == "" {
		t.Errorf("[failed listing] expected unknown with a reason … got %+v %q", rt, why)
	}
}
