// Package runtime is the seam between the supervisor and where agents run
// (a tmux pane, a detached child process): one interface, and the one
// parsed observation of a runtime's sessions.
package runtime

import (
	"context"
	"errors"
	"os"
	"time"

	"herd"
)

// Spec is one launch of an agent.
type Spec struct {
	Session     string
	Incarnation string
	Argv        []string
	Workdir     string
	Env         map[string]string
	// Cgroup is the incarnation's cgroup directory, open, or nil: a runtime
	// that forks the agent itself starts it inside (clone3 with
	// CLONE_INTO_CGROUP), so not one fork of its tree runs outside.
	Cgroup *os.File
}

// Started is what a runtime reports after starting an agent.
type Started struct {
	// RootPID is the process started (the pane's process for tmux).
	RootPID int
	// Wait reaps the process and returns its exit; nil when the process
	// is not this daemon's child (tmux panes).
	Wait func() herd.Exit
}

// Runtime starts agents and reaches what they run in.
type Runtime interface {
	// Start launches spec. prevRoot is the root pid of the slot's previous
	// incarnation: only what it left behind may be cleared for the launch.
	Start(ctx context.Context, spec Spec, prevRoot int) (Started, error)
	// Remove clears what an incarnation leaves once its processes are dead
	// (its tmux session); it never touches a relaunch of the same slot.
	Remove(ctx context.Context, inc herd.Incarnation) error
	// Capture returns the agent's output: the pane with its last lines of
	// history (all of it when lines <= 0), or the tail of the captured
	// stdout (all of it when lines <= 0).
	Capture(ctx context.Context, inc herd.Incarnation, lines int) ([]byte, error)
	// Inject types text into the agent's input.
	Inject(ctx context.Context, inc herd.Incarnation, text string, enter bool) error
}

// Submit is how typed text followed by Enter is made a submission the
// agent takes, and how it is seen to have been one (see agents.InputHolds
// and agents.SubmitSettle).
type Submit struct {
	// Settle is how long Enter waits after the pane showed the text:
	// the agent's window in which an Enter is a newline.
	Settle time.Duration
	// Holds reports whether a capture of the pane shows the text on the
	// agent's input line; known is false when the capture cannot tell.
	// Nil: the pane changing is all that is looked for.
	Holds func(screen string) (holds, known bool)
	// Paste pastes the text instead of typing it (tmux paste-buffer -p:
	// bracketed when the agent asked for bracketed paste), so its line
	// breaks are part of the input, not Enters.
	Paste bool
}

// ErrNotSubmitted is returned when typed text stayed on the agent's input
// line after its Enter (pressed again once).
var ErrNotSubmitted = errors.New("the text stayed on the agent's input line after Enter")

// ErrNotSupported is returned by a runtime asked for what it cannot do
// (typing into an exec agent, say).
var ErrNotSupported = errors.New("not supported by this runtime")

// ErrGone is returned when what was to be acted on no longer exists.
var ErrGone = errors.New("gone")

// Pane is one row of an observation: one pane of a session.
type Pane struct {
	Session string
	ID      string // tmux pane id (%N)
	PID     int    // the pane's own process
	// Dead: the pane's process exited; Status and Signal say how when known.
	Dead     bool
	Status   *int
	Signal   *int
	Attached int       // clients attached to the pane's session
	Activity time.Time // when the pane's window last had output
	// Err is set when the row was empty or garbled: the pane is unknown.
	Err error
}

// Snapshot is one observation of a runtime's sessions: the one parsed
// listing every reader (prober, watchdog, reaper, API) works from.
type Snapshot struct {
	// Panes holds each session's rows in listing order, garbled ones
	// included when their session name could be read.
	Panes map[string][]Pane
	// Err: the observation failed; every session is unknown.
	Err error
	// NoServer: nothing runs, so every session is missing.
	NoServer bool
	// Unattributed is set when a row had no session name: a session
	// missing from the snapshot may be that row, so it is unknown, never
	// missing.
	Unattributed error
	// ServerPID is the server that answered, 0 if no row says.
	ServerPID int
	// At is when the observation was made.
	At time.Time
}

// Own returns the pane of session name whose own process is rootPID: the
// pane herd launched for the agent.
func (s Snapshot) Own(name string, rootPID int) (Pane, bool) {
	for _, p := range s.Panes[name] {
		if p.Err == nil && p.PID == rootPID && rootPID > 0 {
			return p, true
		}
	}
	return Pane{}, false
}

// Agent returns the row that speaks for the agent of session name: its own
// pane; failing that a garbled row of the session, which may be it;
// failing that the session's first pane.
func (s Snapshot) Agent(name string, rootPID int) (Pane, bool) {
	if p, ok := s.Own(name, rootPID); ok {
		return p, true
	}
	rows := s.Panes[name]
	for _, p := range rows {
		if p.Err != nil {
			return p, true
		}
	}
	if len(rows) > 0 {
		return rows[0], true
	}
	return Pane{}, false
}

// Session is what a snapshot says of a whole session, its panes merged.
type Session struct {
	// PaneID and PID are the first pane's: the session's identity between
	// an observation and the re-check before a kill.
	PaneID string
	PID    int
	// Attached is the most clients any row reports.
	Attached int
	// Activity is the latest output time of the session's windows.
	Activity time.Time
	// Err is set when any of the session's rows was empty or garbled.
	Err error
}

// Same reports whether r and o are the same session: same first pane,
// same pane pid.
func (r Session) Same(o Session) bool { return r.PaneID == o.PaneID && r.PID == o.PID }

// Session merges the rows of session name.
func (s Snapshot) Session(name string) (Session, bool) {
	rows, ok := s.Panes[name]
	if !ok || len(rows) == 0 {
		return Session{}, false
	}
	r := Session{PaneID: rows[0].ID, PID: rows[0].PID}
	for _, p := range rows {
		if p.Err != nil {
			if r.Err == nil {
				r.Err = p.Err
			}
			continue
		}
		r.Attached = max(r.Attached, p.Attached)
		if p.Activity.After(r.Activity) {
			r.Activity = p.Activity
		}
	}
	return r, true
}

// Attached reports whether anyone is attached to session name.
func (s Snapshot) Attached(name string) bool {
	r, _ := s.Session(name)
	return r.Attached > 0
}
