package reconcile

import (
	"runtime"
	"testing"
	"time"

	"herd"
)

// TestPlanSteadyCopiesNoSession: the plan of a settled fleet (every
// replica running) allocates a few small containers, not a copy of each
// session: it runs every probe interval.
func TestPlanSteadyCopiesNoSession(t *testing.T) {
	const n = 200
	roles := []herd.Role{{Name: "w", Replicas: n}}
	var sessions []herd.Session
	for i := range n {
		sessions = append(sessions, herd.Session{Name: herd.SessionName("w", i), Role: "w", Index: i, State: herd.StateRunning,
			Incarnation: "inc", RuntimeKind: herd.RuntimeTmux})
	}
	now := time.Now()
	if got := Plan(roles, sessions, now); len(got) != 0 {
		t.Fatalf("expected no action for a settled fleet, got %+v", got)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const runs = 10
	for range runs {
		Plan(roles, sessions, now)
	}
	runtime.ReadMemStats(&after)
	perRun := (after.TotalAlloc - before.TotalAlloc) / runs
	// The session indices and the taken set: under 128 bytes per session.
	if limit := uint64(128 * n); perRun > limit {
		t.Errorf("expected at most %d bytes per plan of %d sessions, got %d", limit, n, perRun)
	}
}
