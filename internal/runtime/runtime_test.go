package runtime_test

import (
	"errors"
	"testing"

	"herd/internal/runtime/tmux"
)

// TestSnapshotPicksTheAgentsPane: with several panes in a session (a
// user's split), the agent's row is the pane herd launched; failing that a
// garbled row (it may be the agent's); failing that the first pane.
func TestSnapshotPicksTheAgentsPane(t *testing.T) {
	user := tmux.Pane{Session: "w-0", PaneID: "%2", PID: 11, Attached: 1}
	agent := tmux.Pane{Session: "w-0", PaneID: "%1", PID: 10, Dead: true}
	garbled := tmux.Pane{Session: "w-0", PaneID: "%3", Err: errors.New("garbled pane_pid")}
	nameless := tmux.Pane{Err: errors.New("empty session_name")}

	s := tmux.Parse([]tmux.Pane{user, agent, nameless}, nil, 0)
	if p, _ := s.Agent("w-0", 10); p.ID != "%1" || !p.Dead {
		t.Errorf("expected the agent's pane %%1 … got %+v", p)
	}
	if s.Unattributed == nil {
		t.Errorf("expected the snapshot marked as having an unattributed row")
	}
	if !s.Attached("w-0") {
		t.Errorf("expected the session attached: a client on any of its panes is on the session")
	}
	if p, _ := tmux.Parse([]tmux.Pane{user, garbled}, nil, 0).Agent("w-0", 10); p.Err == nil {
		t.Errorf("expected the garbled row (it may be the agent's) … got %+v", p)
	}
	if p, _ := tmux.Parse([]tmux.Pane{user}, nil, 0).Agent("w-0", 10); p.ID != "%2" {
		t.Errorf("expected the first pane when the agent's is not there … got %+v", p)
	}
	if _, ok := tmux.Parse([]tmux.Pane{user}, nil, 0).Own("w-0", 0); ok {
		t.Errorf("expected pid 0 to match no pane")
	}
	if r, _ := tmux.Parse([]tmux.Pane{user, garbled}, nil, 0).Session("w-0"); r.Err == nil || r.PID != 11 {
		t.Errorf("expected the merged row unknown, with the first pane's identity … got %+v", r)
	}
}
