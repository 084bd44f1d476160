package reaper

import (
	"errors"
	"fmt"
	"time"

	"herd/internal/tmux"
)

// Row is what one tmux listing says of one session, its panes merged.
type Row struct {
	// PaneID and PID are the first pane's (the agent's): the session's
	// identity between a listing and the re-check before a kill.
	PaneID string
	PID    int
	// Attached is the number of attached clients.
	Attached int
	// Activity is the latest window_activity of the session's windows:
	// it moves on output, unlike session_activity.
	Activity time.Time
	// Err is set when any of the session's rows was empty or garbled:
	// the session is unknown.
	Err error
}

// Same reports whether r and o are the same tmux session: same first
// pane, same pane pid.
func (r Row) Same(o Row) bool { return r.PaneID == o.PaneID && r.PID == o.PID }

// Listing is one round's picture of the tmux server.
type Listing struct {
	// Rows maps a session name to its row.
	Rows map[string]Row
	// NoServer is true when no tmux server runs: there are no tmux
	// sessions at all.
	NoServer bool
	// Unavailable is true when tmux is not installed: nothing about tmux
	// sessions is known.
	Unavailable bool
	// Unattributed is set when a row could not be tied to a session: any
	// session may have more panes than the listing shows.
	Unattributed error
}

// ErrListing wraps a listing failure that aborts a round.
var ErrListing = errors.New("tmux listing failed")

// NewListing builds a round's picture from one ListPanes call. No server
// running is a good picture with no sessions; any other error (permission
// denied, a timeout, a wedged server) aborts the round, since a partial
// picture must not act.
func NewListing(panes []tmux.Pane, err error) (Listing, error) {
	if errors.Is(err, tmux.ErrNoServer) {
		return Listing{Rows: map[string]Row{}, NoServer: true}, nil
	}
	if err != nil {
		return Listing{}, fmt.Errorf("%w: %w", ErrListing, err)
	}
	l := Listing{Rows: make(map[string]Row)}
	for _, p := range panes {
		if p.Session == "" {
			if l.Unattributed == nil {
				l.Unattributed = p.Err
				if p.Err == nil {
					l.Unattributed = errors.New("row with an empty session name")
				}
			}
			continue
		}
		r, seen := l.Rows[p.Session]
		if !seen {
			r.PaneID, r.PID = p.PaneID, p.PID
		}
		if p.Err != nil {
			if r.Err == nil {
				r.Err = p.Err
			}
			l.Rows[p.Session] = r
			continue
		}
		r.Attached = max(r.Attached, p.Attached)
		if p.WindowActivity.After(r.Activity) {
			r.Activity = p.WindowActivity
		}
		l.Rows[p.Session] = r
	}
	return l, nil
}
