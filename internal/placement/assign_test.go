package placement

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"herd"
)

func TestAssign(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := func(role string, idx int, host string) herd.Placement {
		return herd.Placement{Role: role, Index: idx, Host: host, AssignedAt: now}
	}
	old := func(role string, idx int, host string) herd.Placement {
		return herd.Placement{Role: role, Index: idx, Host: host, AssignedAt: now.Add(-time.Hour)}
	}
	spread := func(n int, hosts ...string) herd.Role {
		return herd.Role{Name: "w", Replicas: n, Spread: true, Hosts: hosts}
	}
	up := func(hosts ...string) map[string]bool {
		m := map[string]bool{}
		for _, h := range hosts {
			m[h] = true
		}
		return m
	}
	failover := func(r herd.Role) herd.Role { r.Failover = true; return r }
	cases := []struct {
		name    string
		roles   []herd.Role
		current []herd.Placement
		live    map[string]bool
		want    Change
	}{
		{"unplaced role: nothing", []herd.Role{{Name: "w", Replicas: 2}}, nil, up("a", "b"), Change{}},
		{"spread over every live host", []herd.Role{spread(5)}, nil, up("b", "a", "c"),
			Change{Put: []herd.Placement{p("w", 0, "a"), p("w", 1, "b"), p("w", 2, "c"), p("w", 3, "a"), p("w", 4, "b")}}},
		{"spread over the listed hosts only", []herd.Role{spread(3, "c", "b")}, nil, up("a", "b", "c"),
			Change{Put: []herd.Placement{p("w", 0, "b"), p("w", 1, "c"), p("w", 2, "b")}}},
		{"hosts without spread: the first listed host up", []herd.Role{{Name: "w", Replicas: 2, Hosts: []string{"x", "b", "a"}}}, nil, up("a", "b"),
			Change{Put: []herd.Placement{p("w", 0, "b"), p("w", 1, "b")}}},
		{"no listed host up: the first listed", []herd.Role{{Name: "w", Replicas: 1, Hosts: []string{"x", "y"}}}, nil, up("a"),
			Change{Put: []herd.Placement{p("w", 0, "x")}}},
		{"spread, nobody up: unassigned", []herd.Role{spread(1)}, nil, up(), Change{}},
		{"a host joins: nothing moves", []herd.Role{spread(2)}, []herd.Placement{old("w", 0, "a"), old("w", 1, "a")}, up("a", "b"), Change{}},
		{"a host joins: the next slot goes there", []herd.Role{spread(3)}, []herd.Placement{old("w", 0, "a"), old("w", 1, "a")}, up("a", "b"),
			Change{Put: []herd.Placement{p("w", 2, "b")}}},
		{"scale down forgets the slots beyond", []herd.Role{spread(1)}, []herd.Placement{old("w", 0, "a"), old("w", 1, "b"), old("w", 2, "a")}, up("a", "b"),
			Change{Delete: []Slot{{"w", 1}, {"w", 2}}}},
		{"dead host without failover: its slot waits", []herd.Role{spread(2)}, []herd.Placement{old("w", 0, "a"), old("w", 1, "b")}, up("a"), Change{}},
		{"dead host with failover: its slot moves", []herd.Role{failover(spread(2))}, []herd.Placement{old("w", 0, "a"), old("w", 1, "b")}, up("a", "c"),
			Change{Put: []herd.Placement{p("w", 1, "c")}}},
		{"dead host with failover, nobody else up: stays", []herd.Role{failover(spread(1, "b"))}, []herd.Placement{old("w", 0, "b")}, up("a"), Change{}},
		{"host no longer listed: the slot moves", []herd.Role{{Name: "w", Replicas: 1, Hosts: []string{"a"}}}, []herd.Placement{old("w", 0, "b")}, up("a", "b"),
			Change{Put: []herd.Placement{p("w", 0, "a")}}},
		{"role no longer placed or gone: forgotten", []herd.Role{{Name: "w", Replicas: 2}},
			[]herd.Placement{old("w", 0, "a"), old("gone", 0, "a")}, up("a"), Change{Delete: []Slot{{"gone", 0}, {"w", 0}}}},
	}
	for _, c := range cases {
		got := Assign(c.roles, c.current, c.live, now)
		if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("[%s] change (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestAssignBalanced: spread of 100 replicas over 10 hosts gives each 10,
// and applying the change gives a fixed point (a second pass changes
// nothing).
func TestAssignBalanced(t *testing.T) {
	live := map[string]bool{}
	for _, h := range []string{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h9"} {
		live[h] = true
	}
	roles := []herd.Role{{Name: "w", Replicas: 100, Spread: true}}
	c := Assign(roles, nil, live, time.Now())
	count := map[string]int{}
	for _, p := range c.Put {
		count[p.Host]++
	}
	for h := range live {
		if count[h] != 10 {
			t.Errorf("[balance] expected 10 slots on %s, got %d", h, count[h])
		}
	}
	if again := Assign(roles, c.Put, live, time.Now()); !again.Empty() {
		t.Errorf("[fixed point] expected no change on a second pass, got %+v", again)
	}
}
