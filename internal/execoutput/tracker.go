// Package execoutput tracks what an exec agent printed: its lines as
// agents.ParseLine reads them, the activity and session id they carry, and
// its stderr tail. The watchdog feeds it each agent's new output; it reads
// no file and writes no state itself.
package execoutput

import (
	"strings"
	"sync"
	"time"

	"herd"
	"herd/internal/agents"
)

// Ring sizes of a Tracker.
const (
	RecentEvents = 20 // events kept in TrackerSnapshot.Recent
	StderrLines  = 50 // lines kept in TrackerSnapshot.StderrTail
	// MaxStderrLine bounds each kept stderr line, in bytes.
	MaxStderrLine = 4096
)

// RecentEvent is one observed output event.
type RecentEvent struct {
	Type string    `json:"type"`
	Tool string    `json:"tool,omitempty"`
	Time time.Time `json:"time"`
}

// TrackerSnapshot is a copy of a Tracker's state.
type TrackerSnapshot struct {
	Start        time.Time `json:"start"`
	LastOutputAt time.Time `json:"last_output_at"` // zero until the first stdout line
	// LastProgressAt is the last stdout line that shows the agent moving
	// on: a retry notice is output, not progress.
	LastProgressAt time.Time `json:"last_progress_at"`
	Events         int       `json:"events"`  // stdout lines observed
	Retries        int       `json:"retries"` // of which retry notices and warnings (no progress)
	LastType       string    `json:"last_type"`
	LastTool       string    `json:"last_tool"` // last non-empty tool name
	LastFinal      bool      `json:"last_final"`
	AgentSessionID string    `json:"agent_session_id,omitempty"`
	// Activity is what the lines so far say the agent does (working, idle
	// after a result, blocked after a failed one); "" until a line says.
	Activity herd.Activity `json:"activity,omitempty"`
	Reason   string        `json:"reason,omitempty"` // blocked: rate_limited or api_error
	Error    string        `json:"error,omitempty"`  // blocked: the error
	// ResetAt is when the rate limit of a blocked turn resets, when its
	// error names it.
	ResetAt time.Time `json:"reset_at,omitzero"`
	// LongestSilence is the longest gap between start and progress
	// lines, and between consecutive ones.
	LongestSilence time.Duration `json:"longest_silence"`
	Recent         []RecentEvent `json:"recent"`       // oldest first
	StderrLines    int           `json:"stderr_lines"` // stderr lines observed
	LastStderrAt   time.Time     `json:"last_stderr_at"`
	StderrTail     []string      `json:"stderr_tail"` // oldest first
}

// SilentFor is how long the agent has printed no progress on stdout as of
// now (since start when it never did). Stderr and retry notices do not
// count: an agent that only complains is not making progress.
func (s TrackerSnapshot) SilentFor(now time.Time) time.Duration {
	last := s.LastProgressAt
	if last.IsZero() {
		last = s.Start
	}
	if d := now.Sub(last); d > 0 {
		return d
	}
	return 0
}

// Tracker accumulates the output of one incarnation. It is safe for
// concurrent use (stdout and stderr readers, and the prober).
type Tracker struct {
	mu sync.Mutex // guards the fields below
	s  TrackerSnapshot
	// recent and stderr are rings; next* is the slot written next.
	recent     [RecentEvents]RecentEvent
	nextRecent int
	stderr     [StderrLines]string
	nextStderr int
}

// NewTracker returns a tracker for an incarnation started at start.
func NewTracker(start time.Time) *Tracker {
	return &Tracker{s: TrackerSnapshot{Start: start}}
}

// Observe records one stdout line, read by agents.ParseLine into s, seen
// at at.
func (t *Tracker) Observe(s agents.Signal, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A clock step backwards must not move the last output time back.
	if at.After(t.s.LastOutputAt) {
		t.s.LastOutputAt = at
	}
	if s.Progress {
		prev := t.s.LastProgressAt
		if prev.IsZero() {
			prev = t.s.Start
		}
		if gap := at.Sub(prev); gap > t.s.LongestSilence {
			t.s.LongestSilence = gap
		}
		if at.After(t.s.LastProgressAt) {
			t.s.LastProgressAt = at
		}
	} else {
		t.s.Retries++
	}
	t.s.Events++
	t.s.LastType = s.Event
	t.s.LastFinal = s.Final
	if s.Tool != "" {
		t.s.LastTool = s.Tool
	}
	if s.AgentSessionID != "" && agents.ValidSessionID(s.AgentSessionID) { // never a flag of the resume command
		t.s.AgentSessionID = s.AgentSessionID
	}
	if s.Activity != "" {
		t.s.Activity, t.s.Reason, t.s.Error, t.s.ResetAt = s.Activity, s.Reason, s.Error, s.ResetAt
	}
	t.recent[t.nextRecent%RecentEvents] = RecentEvent{Type: s.Event, Tool: s.Tool, Time: at}
	t.nextRecent++
}

// ObserveStderr records one stderr line seen at at. Long lines are cut to
// MaxStderrLine bytes.
func (t *Tracker) ObserveStderr(line string, at time.Time) {
	if len(line) > MaxStderrLine {
		line = strings.ToValidUTF8(line[:MaxStderrLine], "")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s.StderrLines++
	if at.After(t.s.LastStderrAt) {
		t.s.LastStderrAt = at
	}
	t.stderr[t.nextStderr%StderrLines] = line
	t.nextStderr++
}

// Snapshot returns a copy of the tracker's state.
func (t *Tracker) Snapshot() TrackerSnapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.s
	s.Recent = ringCopy(t.recent[:], t.nextRecent)
	s.StderrTail = ringCopy(t.stderr[:], t.nextStderr)
	return s
}

// ringCopy returns the filled part of ring, oldest first, given the total
// number of writes n.
func ringCopy[T any](ring []T, n int) []T {
	size := len(ring)
	if n <= size {
		return append([]T{}, ring[:n]...)
	}
	out := make([]T, 0, size)
	start := n % size
	out = append(out, ring[start:]...)
	return append(out, ring[:start]...)
}
