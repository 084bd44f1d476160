package activity

import (
	"strings"
	"sync"
	"time"
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
	Start          time.Time     `json:"start"`
	LastOutputAt   time.Time     `json:"last_output_at"` // zero until the first stdout line
	Events         int           `json:"events"`         // stdout lines observed
	LastType       string        `json:"last_type"`
	LastTool       string        `json:"last_tool"` // last non-empty tool name
	LastFinal      bool          `json:"last_final"`
	AgentSessionID string        `json:"agent_session_id,omitempty"`
	LongestSilence time.Duration `json:"longest_silence"` // max gap between start and outputs, and between consecutive outputs
	Recent         []RecentEvent `json:"recent"`          // oldest first
	StderrLines    int           `json:"stderr_lines"`    // stderr lines observed
	LastStderrAt   time.Time     `json:"last_stderr_at"`
	StderrTail     []string      `json:"stderr_tail"` // oldest first
}

// SilentFor is how long the agent has printed nothing on stdout as of now
// (since start when it never did). Stderr does not count: an agent that only
// complains is not making progress.
func (s TrackerSnapshot) SilentFor(now time.Time) time.Duration {
	last := s.LastOutputAt
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

// Observe records one stdout line parsed into o, seen at at.
func (t *Tracker) Observe(o Output, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev := t.s.LastOutputAt
	if prev.IsZero() {
		prev = t.s.Start
	}
	if gap := at.Sub(prev); gap > t.s.LongestSilence {
		t.s.LongestSilence = gap
	}
	// A clock step backwards must not move the last output time back.
	if at.After(t.s.LastOutputAt) {
		t.s.LastOutputAt = at
	}
	t.s.Events++
	t.s.LastType = o.Type
	t.s.LastFinal = o.Final
	if o.Tool != "" {
		t.s.LastTool = o.Tool
	}
	if o.AgentSessionID != "" && ValidAgentSessionID(o.AgentSessionID) { // never a flag of the resume command
		t.s.AgentSessionID = o.AgentSessionID
	}
	t.recent[t.nextRecent%RecentEvents] = RecentEvent{Type: o.Type, Tool: o.Tool, Time: at}
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
