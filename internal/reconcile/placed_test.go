package reconcile

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"herd"
)

func TestPlanPlaced(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	past := now.Add(-time.Second)
	role := herd.Role{Name: "w", Replicas: 3, Spread: true}
	sess := func(idx int, st herd.State) herd.Session {
		return herd.Session{Name: herd.SessionName("w", idx), Role: "w", Index: idx, State: st}
	}
	placedAt := now.Add(-time.Hour)
	slots := func(idx ...int) map[string]map[int]time.Time {
		m := map[int]time.Time{}
		for _, i := range idx {
			m[i] = placedAt
		}
		return map[string]map[int]time.Time{"w": m}
	}
	launch := func(idx int) Action {
		return Action{Kind: Launch, Role: "w", Session: herd.SessionName("w", idx), Index: idx}
	}
	stoppedSince := func(idx int, at time.Time) herd.Session {
		s := sess(idx, herd.StateStopped)
		s.StateSince = at
		return s
	}
	backoff := sess(0, herd.StateBackoff)
	backoff.BackoffUntil = &past
	cases := []struct {
		name     string
		replicas int
		mine     map[string]map[int]time.Time
		sessions []herd.Session
		want     []Action
	}{
		{"nothing placed here", 3, nil, nil, nil},
		{"launches the slots placed here", 3, slots(0, 2), nil, []Action{launch(0), launch(2)}},
		{"a slot held here stays", 3, slots(1), []herd.Session{sess(1, herd.StateRunning)}, nil},
		{"a stopped slot is launched again", 3, slots(1), []herd.Session{sess(1, herd.StateStopped)}, []Action{launch(1)}},
		{"a due backoff relaunches", 3, slots(0), []herd.Session{backoff}, []Action{{Kind: Relaunch, Role: "w", Session: "w-0"}}},
		{"a slot moved away stops", 3, slots(0), []herd.Session{sess(0, herd.StateRunning), sess(1, herd.StateRunning)},
			[]Action{{Kind: Stop, Role: "w", Session: "w-1", Index: 1, Reason: herd.ReasonMoved}}},
		{"a failed slot moved away stops too", 3, nil, []herd.Session{sess(1, herd.StateFailed)},
			[]Action{{Kind: Stop, Role: "w", Session: "w-1", Index: 1, Reason: herd.ReasonMoved}}},
		{"no longer placed, beyond the replicas: scaled down", 1, slots(0), []herd.Session{sess(0, herd.StateRunning), sess(2, herd.StateRunning)},
			[]Action{{Kind: Stop, Role: "w", Session: "w-2", Index: 2, Reason: herd.ReasonScaledDown}}},
		{"placed here beyond the replicas (a lower slot given back): stays", 2, slots(0, 2),
			[]herd.Session{sess(0, herd.StateRunning), sess(1, herd.StateStopped), sess(2, herd.StateRunning)}, nil},
		{"stopped after its slot was placed: waits for the leader", 3, slots(1), []herd.Session{stoppedSince(1, past)}, nil},
		{"placed again after the stop: launched", 3, slots(1), []herd.Session{stoppedSince(1, placedAt.Add(-time.Minute))}, []Action{launch(1)}},
	}
	for _, c := range cases {
		r := role
		r.Replicas = c.replicas
		got := PlanPlaced([]herd.Role{r}, c.mine, c.sessions, now)
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("[%s] plan mismatch (-expected +got):\n%s", c.name, diff)
		}
	}
}
