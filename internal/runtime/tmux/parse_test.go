package tmux

import (
	"errors"
	"fmt"
	"os/exec"
	"testing"
)

// TestParseNoSocket: a missing socket is "no server" unless the server of
// the previous listing still runs.
func TestParseNoSocket(t *testing.T) {
	noSocket := fmt.Errorf("tmux list-panes: %w", ErrNoSocket)
	if s := Parse(nil, noSocket, 0); !s.NoServer || s.Err != nil {
		t.Errorf("expected no server with none seen before … got %+v", s)
	}
	// A process that is no tmux server: a reused pid is not trusted.
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	if s := Parse(nil, noSocket, other.Process.Pid); !s.NoServer || s.Err != nil {
		t.Errorf("expected no server when the pid is not a tmux server … got %+v", s)
	}
	if s := Parse(nil, fmt.Errorf("x: %w", ErrNoServer), other.Process.Pid); !s.NoServer {
		t.Errorf("expected a refused connection to be no server … got %+v", s)
	}
	if s := Parse(nil, fmt.Errorf("permission denied"), 0); s.Err == nil || s.NoServer {
		t.Errorf("expected any other error to fail the snapshot … got %+v", s)
	}
}

// TestLeftoverWithUnattributedRow: a launch whose name is taken never clears
// a session it cannot see, nor one whose rows it cannot all read.
func TestLeftoverWithUnattributedRow(t *testing.T) {
	dead := Pane{Session: "w-0", PaneID: "%1", PID: 10, Dead: true}
	prev := Pane{Session: "w-0", PaneID: "%1", PID: 10}
	user := Pane{Session: "w-0", PaneID: "%2", PID: 11}
	nameless := Pane{Err: errors.New("empty session_name")}
	garbled := Pane{Session: "w-0", Err: errors.New("garbled pane_pid")}
	tests := []struct {
		name  string
		panes []Pane
		prev  int
		clear bool
	}{
		{"dead pane", []Pane{dead}, 0, true},
		{"previous incarnation's pane", []Pane{prev}, 10, true},
		{"previous pane beside a user's split", []Pane{user, prev}, 10, true},
		{"someone else's live pane", []Pane{user}, 10, false},
		{"dead pane beside a live one", []Pane{dead, user}, 0, false},
		{"not listed", nil, 10, true},
		{"not listed, a row with no session name", []Pane{nameless}, 10, false},
		{"a row of it garbled", []Pane{prev, garbled}, 10, false},
	}
	for _, tt := range tests {
		if err := Leftover(Parse(tt.panes, nil, 0), "w-0", tt.prev); (err == nil) != tt.clear {
			t.Errorf("[%s] expected clear %v … got %v", tt.name, tt.clear, err)
		}
	}
}
