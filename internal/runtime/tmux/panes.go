package tmux

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pane is one row of the batched listing.
//
// When Err is nil every field was present and well formed. When Err is set
// the session's state is unknown, never dead and never absent: Session is
// filled when the row's first field was non-empty, and a row with an empty
// Session could not be attributed, so a caller must then treat every session
// missing from the listing as unknown too.
//
// A dead pane reports either DeadStatus (it exited) or DeadSignal (a signal
// killed it). Both nil on a dead pane means tmux has not reported how it
// ended: tmux 3.3 may mark a pane dead before it has reaped the process, and
// tmux versions before 3.3 have no pane_dead_signal, so a signal death shows
// as neither. Such a pane is dead, with an unknown exit.
type Pane struct {
	Session        string
	PaneID         string // %N
	PID            int
	Dead           bool
	DeadStatus     *int // exit code; nil when not dead or not reported
	DeadSignal     *int // terminating signal; nil when not dead or not reported
	Attached       int  // session_attached: number of attached clients
	WindowActivity time.Time
	SessionCreated time.Time
	ServerPID      int   // pid of the tmux server that listed the pane
	Err            error // set when a field was empty or garbled: state unknown
}

// paneFields are the listing's columns, in order. The session name is first
// so a row garbled further on can still be attributed. tmux escapes tabs and
// newlines in session names, so the separators are unambiguous.
var paneFields = []string{
	"session_name",
	"pane_id",
	"pane_pid",
	"pane_dead",
	"pane_dead_status",
	"pane_dead_signal",
	"session_attached",
	"window_activity",
	"session_created",
	"pid",
}

// paneFormat is the -F argument of list-panes: the fields, tab-separated.
var paneFormat = func() string {
	f := make([]string, len(paneFields))
	for i, name := range paneFields {
		f[i] = "#{" + name + "}"
	}
	return strings.Join(f, "\t")
}()

var paneIDRE = regexp.MustCompile(`^%[0-9]+$`)

// ListPanes lists every pane of every session with one
// `list-panes -a -F <format>` call and parses it with ParsePanes. With no
// server it returns an error wrapping ErrNoServer; what that means is the
// caller's decision.
//
// tmux can miss the death of a pane's process (the pane is dead but the
// zombie is not reaped, so its status is never reported, until another child
// dies). When a dead pane lacks both status and signal, ListPanes sends
// SIGCHLD to the server that listed it, which makes tmux reap, and lists once
// more; if that second call fails the first listing is returned. The
// listing's server pid is only tmux's word: the signal is sent only once
// the pid is proven to be the tmux server listening on this client's socket
// (see NudgeServer); otherwise the first listing is returned as it is.
func (c *Client) ListPanes(ctx context.Context) ([]Pane, error) {
	panes, err := c.listPanes(ctx)
	if err != nil {
		return nil, err
	}
	pid := unreportedExitServer(panes)
	if pid == 0 {
		return panes, nil
	}
	if c.NudgeServer(pid) != nil {
		return panes, nil
	}
	again, err := c.listPanes(ctx)
	if err != nil {
		return panes, nil
	}
	return again, nil
}

func (c *Client) listPanes(ctx context.Context) ([]Pane, error) {
	out, control, err := c.runVia(ctx, nil, []string{"list-panes", "-a", "-F", paneFormat})
	if errors.Is(err, ErrEmptyServer) {
		// A server with no session left, between its last session's
		// kill and its exit: a good, empty listing. (A call that timed
		// out never matches: its error is the deadline.)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	panes := ParsePanes(out)
	if control && !slices.ContainsFunc(panes, func(p Pane) bool { return p.Session == ControlSession }) {
		// The connection's client is attached to ControlSession, so a
		// listing it answered without that session is not tmux's
		// word: every session in it is unknown, none absent.
		return nil, fmt.Errorf("tmux: a listing over the control connection lacks %s, the session the connection is attached to: answer not trusted", ControlSession)
	}
	return panes, nil
}

// FindPane returns the well-formed row of session whose pane pid is pid: the
// pane started there with that process (its pid stays the pane's after it
// dies, with remain-on-exit), whatever other panes a user has split off and
// whichever is active. pid 0 matches nothing.
func FindPane(panes []Pane, session string, pid int) (Pane, bool) {
	if pid <= 0 {
		return Pane{}, false
	}
	for _, p := range panes {
		if p.Err == nil && p.Session == session && p.PID == pid {
			return p, true
		}
	}
	return Pane{}, false
}

// unreportedExitServer returns the server pid of a dead pane whose exit tmux
// has not reported, or 0.
func unreportedExitServer(panes []Pane) int {
	for _, p := range panes {
		if p.Err == nil && p.Dead && p.DeadStatus == nil && p.DeadSignal == nil && p.ServerPID > 0 {
			return p.ServerPID
		}
	}
	return 0
}

// ParsePanes parses list-panes output in the ListPanes format, one Pane per
// non-blank line (CRLF tolerated). It never fails as a whole: a bad row
// becomes a Pane with Err set.
func ParsePanes(out []byte) []Pane {
	var panes []Pane
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		p := parsePane(line)
		if p.Err != nil {
			p.Err = fmt.Errorf("tmux: list-panes line %d: %w", i+1, p.Err)
		}
		panes = append(panes, p)
	}
	return panes
}

// parsePane parses one row, stopping at the first bad field.
func parsePane(line string) Pane {
	f := strings.Split(line, "\t")
	p := Pane{Session: f[0]}
	if len(f) != len(paneFields) {
		p.Err = fmt.Errorf("%d fields, want %d", len(f), len(paneFields))
		return p
	}
	if p.Session == "" {
		p.Err = errors.New("empty session_name")
		return p
	}
	p.PaneID = f[1]
	if !paneIDRE.MatchString(p.PaneID) {
		p.Err = fieldError("pane_id", f[1])
		return p
	}
	var err error
	if p.PID, err = positive("pane_pid", f[2]); err != nil {
		p.Err = err
		return p
	}
	switch f[3] {
	case "0":
	case "1":
		p.Dead = true
	default:
		p.Err = fieldError("pane_dead", f[3])
		return p
	}
	status, err := optional("pane_dead_status", f[4])
	if err != nil {
		p.Err = err
		return p
	}
	signal, err := optional("pane_dead_signal", f[5])
	if err != nil {
		p.Err = err
		return p
	}
	if p.Dead {
		p.DeadStatus, p.DeadSignal = status, signal
	}
	if p.Attached, err = nonNegative("session_attached", f[6]); err != nil {
		p.Err = err
		return p
	}
	if p.WindowActivity, err = unixTime("window_activity", f[7]); err != nil {
		p.Err = err
		return p
	}
	if p.SessionCreated, err = unixTime("session_created", f[8]); err != nil {
		p.Err = err
		return p
	}
	if p.ServerPID, err = positive("pid", f[9]); err != nil {
		p.Err = err
		return p
	}
	return p
}

func fieldError(name, v string) error {
	if v == "" {
		return fmt.Errorf("empty %s", name)
	}
	return fmt.Errorf("garbled %s %q", name, v)
}

// nonNegative parses a decimal integer >= 0 (digits only: no sign, no space).
func nonNegative(name, v string) (int, error) {
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, fieldError(name, v)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fieldError(name, v)
	}
	return n, nil
}

func positive(name, v string) (int, error) {
	n, err := nonNegative(name, v)
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fieldError(name, v)
	}
	return n, nil
}

// optional parses a field that is empty when tmux has nothing to report.
func optional(name, v string) (*int, error) {
	if v == "" {
		return nil, nil
	}
	n, err := nonNegative(name, v)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

// unixTime parses unix seconds; 0 is garbled (it would read as 1970, i.e.
// idle for decades).
func unixTime(name, v string) (time.Time, error) {
	n, err := positive(name, v)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(int64(n), 0), nil
}
