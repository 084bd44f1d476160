package execoutput

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"herd"
	"herd/internal/agents"
)

// line reads one Claude stream-json line as the watchdog does.
func line(s string, at time.Time) agents.Signal {
	return agents.ParseLine(herd.AgentClaude, []byte(s), at)
}

func TestTrackerEmpty(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewTracker(start).Snapshot()
	if s.Events != 0 || !s.LastOutputAt.IsZero() || s.Recent == nil || len(s.Recent) != 0 || s.StderrTail == nil {
		t.Errorf("[empty] expected zero counts and empty non-nil rings, got %+v", s)
	}
	if got := s.SilentFor(start.Add(time.Minute)); got != time.Minute {
		t.Errorf("[silent since start] expected 1m, got %v", got)
	}
}

func TestTrackerObserve(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(sec int) time.Time { return start.Add(time.Duration(sec) * time.Second) }
	tr := NewTracker(start)
	tr.Observe(line(`{"type":"system","subtype":"init","session_id":"sid"}`, at(5)), at(5))
	tr.Observe(line(`{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash"}]}}`, at(7)), at(7))
	tr.Observe(line(`{"type":"user"}`, at(37)), at(37)) // 30 s gap: longest
	// Retries for a minute: output, not progress, so no gap is counted.
	tr.Observe(line(`{"type":"system","subtype":"api_retry","error":"overloaded"}`, at(60)), at(60))
	tr.Observe(line(`{"type":"system","subtype":"api_retry","error":"overloaded"}`, at(97)), at(97))
	tr.Observe(line(`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 overloaded"}`, at(100)), at(100))
	s := tr.Snapshot()
	want := TrackerSnapshot{
		Start: start, LastOutputAt: at(100), LastProgressAt: at(100), Events: 6, Retries: 2, LastType: "result", LastTool: "Bash",
		LastFinal: true, AgentSessionID: "sid", LongestSilence: 63 * time.Second,
		Activity: herd.ActivityBlocked, Reason: agents.ReasonAPIError, Error: "API Error: 529 overloaded",
		Recent: []RecentEvent{
			{Type: "system/init", Time: at(5)}, {Type: "assistant", Tool: "Bash", Time: at(7)},
			{Type: "user", Time: at(37)}, {Type: "system/api_retry", Time: at(60)}, {Type: "system/api_retry", Time: at(97)},
			{Type: "result", Time: at(100)},
		},
		StderrTail: []string{},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("[observe] expected … got … (-want +got):\n%s", diff)
	}
	if got := s.SilentFor(at(110)); got != 10*time.Second {
		t.Errorf("[silent for] expected 10s, got %v", got)
	}
	if got := s.SilentFor(at(90)); got != 0 {
		t.Errorf("[clock behind] expected 0, got %v", got)
	}
}

// TestTrackerKeepsOnlyValidSessionIDs: a Signal built by hand cannot plant
// a flag-looking id that a resume would pass to the agent.
func TestTrackerKeepsOnlyValidSessionIDs(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := NewTracker(start)
	tr.Observe(agents.Signal{Event: "system", AgentSessionID: "sid-1", Progress: true}, start.Add(time.Second))
	tr.Observe(agents.Signal{Event: "system", AgentSessionID: "--dangerously-skip-permissions", Progress: true}, start.Add(2*time.Second))
	if s := tr.Snapshot(); s.AgentSessionID != "sid-1" || s.Events != 2 {
		t.Errorf("[flag id] expected sid-1 kept and both lines counted, got %q, %d events", s.AgentSessionID, s.Events)
	}
}

func TestTrackerSilenceFromStart(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := NewTracker(start)
	tr.Observe(agents.Signal{Event: agents.LineText, Progress: true}, start.Add(time.Minute))
	tr.Observe(agents.Signal{Event: agents.LineText, Progress: true}, start.Add(time.Minute+time.Second))
	if got := tr.Snapshot().LongestSilence; got != time.Minute {
		t.Errorf("[gap before first output] expected 1m, got %v", got)
	}
	// A clock step backwards neither counts as silence nor moves LastOutputAt back.
	tr.Observe(agents.Signal{Event: agents.LineText, Progress: true}, start)
	s := tr.Snapshot()
	if s.LongestSilence != time.Minute || !s.LastOutputAt.Equal(start.Add(time.Minute+time.Second)) {
		t.Errorf("[clock step back] expected 1m and unchanged last output, got %v %v", s.LongestSilence, s.LastOutputAt)
	}
}

func TestTrackerRings(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := NewTracker(start)
	for i := range 45 {
		tr.Observe(agents.Signal{Event: fmt.Sprint(i), Progress: true}, start.Add(time.Duration(i)*time.Second))
	}
	for i := range 120 {
		tr.ObserveStderr(fmt.Sprint("line ", i), start.Add(time.Duration(i)*time.Second))
	}
	tr.ObserveStderr(strings.Repeat("é", MaxStderrLine), start.Add(200*time.Second))
	s := tr.Snapshot()
	if len(s.Recent) != RecentEvents || s.Recent[0].Type != "25" || s.Recent[RecentEvents-1].Type != "44" {
		t.Errorf("[recent ring] expected events 25..44, got %d events from %v to %v", len(s.Recent), s.Recent[0], s.Recent[len(s.Recent)-1])
	}
	if len(s.StderrTail) != StderrLines || s.StderrTail[0] != "line 71" || s.StderrTail[StderrLines-2] != "line 119" {
		t.Errorf("[stderr ring] expected lines 71..119 then the long one, got %q … %q", s.StderrTail[0], s.StderrTail[StderrLines-2])
	}
	last := s.StderrTail[StderrLines-1]
	if len(last) > MaxStderrLine || !strings.HasPrefix(last, "é") || strings.ContainsRune(last, '\uFFFD') {
		t.Errorf("[long line] expected a valid line cut to %d bytes, got %d bytes", MaxStderrLine, len(last))
	}
	if s.StderrLines != 121 || !s.LastStderrAt.Equal(start.Add(200*time.Second)) {
		t.Errorf("[stderr counters] expected 121 lines, got %d at %v", s.StderrLines, s.LastStderrAt)
	}
	if s.Events != 45 || !s.LastOutputAt.Equal(start.Add(44*time.Second)) {
		t.Errorf("[stderr is not output] expected 45 events, last at 44s, got %d at %v", s.Events, s.LastOutputAt)
	}
	// The snapshot is a copy.
	s.Recent[0].Type = "changed"
	if tr.Snapshot().Recent[0].Type != "25" {
		t.Errorf("[copy] expected snapshot not to alias the ring")
	}
}

func TestTrackerConcurrent(t *testing.T) {
	tr := NewTracker(time.Now())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				tr.Observe(agents.Signal{Event: "x", Progress: true}, time.Now())
				tr.ObserveStderr("e", time.Now())
				_ = tr.Snapshot()
			}
		})
	}
	wg.Wait()
	if s := tr.Snapshot(); s.Events != 800 || s.StderrLines != 800 {
		t.Errorf("[concurrent] expected 800/800, got %d/%d", s.Events, s.StderrLines)
	}
}

// TestTrackerKeepsResetTime: a turn ended by a rate limit that names its
// reset keeps the reset time, for the account's other sessions to wait
// for.
func TestTrackerKeepsResetTime(t *testing.T) {
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := start.Add(10 * time.Second)
	tr := NewTracker(start)
	tr.Observe(line(`{"type":"result","subtype":"success","is_error":true,"result":"API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again in 30 seconds."}`, at), at)
	s := tr.Snapshot()
	if s.Activity != herd.ActivityBlocked || s.Reason != agents.ReasonRateLimited || !s.ResetAt.Equal(at.Add(30*time.Second)) {
		t.Errorf("expected blocked by a rate limit resetting at %s, got %s %s %s", at.Add(30*time.Second), s.Activity, s.Reason, s.ResetAt)
	}
	tr.Observe(line(`{"type":"result","subtype":"success","result":"done"}`, at.Add(time.Minute)), at.Add(time.Minute))
	if s := tr.Snapshot(); s.Activity != herd.ActivityIdle || !s.ResetAt.IsZero() {
		t.Errorf("[next turn] expected idle with no reset, got %s %s", s.Activity, s.ResetAt)
	}
}
