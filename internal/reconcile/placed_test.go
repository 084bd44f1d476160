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
	slots := func(idx ...int) map[string]map[int]bool {
		m := map[int]bool{}
		for _, i := range idx {
			m[i] = true
		}
		return map[string]map[int]bool{"w": m}
	}
	launch := func(idx int) Action {
		return Action{Kind: Launch, Role: "w", Session: herd.SessionName("w", idx), Index: idx}
	}
	backoff := sess(0, herd.StateBackoff)
	backoff.BackoffUntil = &past
	cases := []struct {
		name     string
		replicas int
		mine     map[string]map[int]bool
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
		{"beyond the replicas: scaled down", 1, slots(0, 2), []herd.Session{sess(0, herd.StateRunning), sess(2, herd.StateRunning)},
			[]Action{{Kind: Stop, Role: "w", Session: "w-2", Index: 2, Reason: herd.ReasonScaledDown}}},
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
