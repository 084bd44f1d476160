package reconcile

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"herd"
	"herd/internal/config"
)

func TestPlan(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Second), now.Add(time.Second)
	role := func(name string, n int) herd.Role { return herd.Role{Name: name, Replicas: n} }
	sess := func(role string, idx int, st herd.State) herd.Session {
		return herd.Session{Name: herd.SessionName(role, idx), Role: role, Index: idx, State: st}
	}
	backoff := func(idx int, until *time.Time) herd.Session {
		s := sess("w", idx, herd.StateBackoff)
		s.BackoffUntil = until
		return s
	}
	launch := func(idx int) Action {
		return Action{Kind: Launch, Role: "w", Session: herd.SessionName("w", idx), Index: idx}
	}

	cases := []struct {
		name     string
		roles    []herd.Role
		sessions []herd.Session
		want     []Action
	}{
		{"empty", nil, nil, nil},
		{"fresh role", []herd.Role{role("w", 2)}, nil, []Action{launch(0), launch(1)}},
		{"satisfied", []herd.Role{role("w", 1)}, []herd.Session{sess("w", 0, herd.StateRunning)}, nil},
		{"fills the lowest free index", []herd.Role{role("w", 2)}, []herd.Session{sess("w", 1, herd.StateRunning)}, []Action{launch(0)}},
		{"a stopped slot is free again", []herd.Role{role("w", 1)}, []herd.Session{sess("w", 0, herd.StateStopped)}, []Action{launch(0)}},
		{"stopped slot, replicas dropped", []herd.Role{role("w", 1)}, []herd.Session{sess("w", 0, herd.StateStopped), sess("w", 1, herd.StateRunning)}, nil},
		{"failed holds its slot", []herd.Role{role("w", 1)}, []herd.Session{sess("w", 0, herd.StateFailed)}, nil},
		{"succeeded holds its slot", []herd.Role{role("w", 1)}, []herd.Session{sess("w", 0, herd.StateSucceeded)}, nil},
		{"backoff not yet due", []herd.Role{role("w", 1)}, []herd.Session{backoff(0, &future)}, nil},
		{"backoff due", []herd.Role{role("w", 1)}, []herd.Session{backoff(0, &past)}, []Action{{Kind: Relaunch, Role: "w", Session: "w-0"}}},
		{"backoff due exactly now", []herd.Role{role("w", 1)}, []herd.Session{backoff(0, &now)}, []Action{{Kind: Relaunch, Role: "w", Session: "w-0"}}},
		{"backoff without deadline is due (never stuck)", []herd.Role{role("w", 1)}, []herd.Session{backoff(0, nil)}, []Action{{Kind: Relaunch, Role: "w", Session: "w-0"}}},
		{"crashed marker relaunches", []herd.Role{role("w", 1)}, []herd.Session{sess("w", 0, herd.StateCrashed)}, []Action{{Kind: Relaunch, Role: "w", Session: "w-0"}}},
		{"scale down stops the highest", []herd.Role{role("w", 1)},
			[]herd.Session{sess("w", 0, herd.StateRunning), sess("w", 1, herd.StateRunning), sess("w", 2, herd.StateBackoff)},
			[]Action{{Kind: Stop, Role: "w", Session: "w-1", Index: 1, Reason: herd.ReasonScaledDown}, {Kind: Stop, Role: "w", Session: "w-2", Index: 2, Reason: herd.ReasonScaledDown}}},
		{"scale to zero", []herd.Role{role("w", 0)}, []herd.Session{sess("w", 0, herd.StateFailed)},
			[]Action{{Kind: Stop, Role: "w", Session: "w-0", Reason: herd.ReasonScaledDown}}},
		{"role gone: live sessions stop, dead ones stay", nil,
			[]herd.Session{sess("old", 0, herd.StateRunning), sess("old", 1, herd.StateFailed)},
			[]Action{{Kind: Stop, Role: "old", Session: "old-0", Reason: herd.ReasonRoleDeleted}}},
		{"each role counts its own launches", []herd.Role{role("w", 2), role("v", 2)}, []herd.Session{sess("v", 0, herd.StateRunning)},
			[]Action{{Kind: Launch, Role: "v", Session: "v-1", Index: 1}, launch(0), launch(1)}},
		{"unknown holds its slot (no second copy)", []herd.Role{role("w", 1)}, []herd.Session{sess("w", 0, herd.StateUnknown)}, nil},
	}
	for _, c := range cases {
		got := Plan(c.roles, c.sessions, now)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("[%s] plan mismatch (-expected +got):\n%s", c.name, diff)
		}
	}
}

// TestPlanReplicasOverTheLimit: regression — a role with replicas far over
// config.MaxReplicas (stored before the limit existed) spun the planner at
// full CPU (quadratic in the replicas) and the daemon ignored SIGTERM. The
// plan is capped at the limit, fills the free slots, and returns at once.
func TestPlanReplicasOverTheLimit(t *testing.T) {
	sessions := []herd.Session{
		{Name: "w-0", Role: "w", Index: 0, State: herd.StateRunning},
		{Name: "w-5", Role: "w", Index: 5, State: herd.StateRunning},
	}
	done := make(chan []Action, 1)
	go func() {
		done <- Plan([]herd.Role{{Name: "w", Replicas: 2000000000}}, sessions, time.Now())
	}()
	var got []Action
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("expected the plan at once … still planning after 10s")
	}
	if want := config.MaxReplicas - len(sessions); len(got) != want {
		t.Fatalf("expected %d launches (up to %d replicas) … got %d actions", want, config.MaxReplicas, len(got))
	}
	seen := map[int]bool{0: true, 5: true}
	for _, a := range got {
		if a.Kind != Launch || seen[a.Index] || a.Index >= config.MaxReplicas+len(sessions) {
			t.Fatalf("expected launches of distinct free slots … got %+v", a)
		}
		seen[a.Index] = true
	}
	if len(seen) != config.MaxReplicas {
		t.Errorf("expected %d slots held … got %d", config.MaxReplicas, len(seen))
	}
}

// BenchmarkPlanMaxReplicas plans a role at the limit from scratch.
func BenchmarkPlanMaxReplicas(b *testing.B) {
	roles := []herd.Role{{Name: "w", Replicas: config.MaxReplicas}}
	now := time.Now()
	for b.Loop() {
		Plan(roles, nil, now)
	}
}

// TestPlanWithDemand: a task role is planned for the queue's demand up
// to its max_replicas; back at its replicas, a scale-down stops the
// highest free replicas, never one that holds a task.
func TestPlanWithDemand(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	role := herd.Role{Name: "w", Replicas: 1, MaxReplicas: 4, Tasks: true}
	fixed := herd.Role{Name: "f", Replicas: 1, Tasks: true}
	run := func(r string, idx int) herd.Session {
		return herd.Session{Name: herd.SessionName(r, idx), Role: r, Index: idx, State: herd.StateRunning}
	}
	launch := func(idx int) Action {
		return Action{Kind: Launch, Role: "w", Session: herd.SessionName("w", idx), Index: idx}
	}
	stop := func(idx int) Action {
		return Action{Kind: Stop, Role: "w", Session: herd.SessionName("w", idx), Index: idx, Reason: herd.ReasonScaledDown}
	}
	for _, c := range []struct {
		name     string
		roles    []herd.Role
		sessions []herd.Session
		d        Demand
		want     []Action
	}{
		{"no demand: replicas", []herd.Role{role}, []herd.Session{run("w", 0)}, Demand{Known: true}, nil},
		{"demand not known yet: no scale-down", []herd.Role{role}, []herd.Session{run("w", 0), run("w", 1)}, Demand{}, nil},
		{"demand of 3", []herd.Role{role}, []herd.Session{run("w", 0)}, Demand{Want: map[string]int{"w": 3}}, []Action{launch(1), launch(2)}},
		{"demand over max_replicas", []herd.Role{role}, nil, Demand{Want: map[string]int{"w": 9}}, []Action{launch(0), launch(1), launch(2), launch(3)}},
		{"no max_replicas: fixed", []herd.Role{fixed}, []herd.Session{run("f", 0)}, Demand{Want: map[string]int{"f": 3}}, nil},
		{"demand gone: the highest go", []herd.Role{role}, []herd.Session{run("w", 0), run("w", 1), run("w", 2)}, Demand{Known: true}, []Action{stop(1), stop(2)}},
		{"demand gone: a replica holding a task stays", []herd.Role{role}, []herd.Session{run("w", 0), run("w", 1), run("w", 2)},
			Demand{Keep: map[string]bool{"w-2": true}, Known: true}, []Action{stop(0), stop(1)}},
		{"every replica holds a task", []herd.Role{role}, []herd.Session{run("w", 0), run("w", 1)},
			Demand{Keep: map[string]bool{"w-0": true, "w-1": true}, Known: true}, nil},
	} {
		if diff := cmp.Diff(c.want, PlanWith(c.roles, c.sessions, now, c.d)); diff != "" {
			t.Errorf("[%s] (-want +got):\n%s", c.name, diff)
		}
	}
}
