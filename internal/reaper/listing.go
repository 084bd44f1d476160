package reaper

import (
	"errors"
	"fmt"

	"herd/internal/runtime"
)

// Row is what one listing says of one session, its panes merged.
type Row = runtime.Session

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

// NewListing builds a round's picture from one runtime snapshot. No server
// running is a good picture with no sessions; a failed observation
// (permission denied, a timeout, a wedged server, a socket gone under a
// live server) aborts the round, since a partial picture must not act.
func NewListing(snap runtime.Snapshot) (Listing, error) {
	if snap.Err != nil {
		return Listing{}, fmt.Errorf("%w: %w", ErrListing, snap.Err)
	}
	l := Listing{Rows: make(map[string]Row, len(snap.Panes)), NoServer: snap.NoServer, Unattributed: snap.Unattributed}
	for name := range snap.Panes {
		if r, ok := snap.Session(name); ok {
			l.Rows[name] = r
		}
	}
	return l, nil
}
