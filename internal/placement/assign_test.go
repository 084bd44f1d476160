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
		got := Assign(c.roles, c.current, nil, c.live, nil, now)
		if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("[%s] change (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestAssignStopped: a slot whose session is stopped does not count
// toward the replicas (as for an unplaced role): herd stop, which drops a
// replica, forgets that slot and no other; a slot still wanted is placed
// again after the stop; a resumed session keeps its host.
func TestAssignStopped(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old := func(idx int, host string) herd.Placement {
		return herd.Placement{Role: "w", Index: idx, Host: host, AssignedAt: now.Add(-time.Hour)}
	}
	p := func(idx int, host string) herd.Placement {
		return herd.Placement{Role: "w", Index: idx, Host: host, AssignedAt: now}
	}
	ses := func(idx int, host string, st herd.State) herd.Session {
		return herd.Session{Name: herd.SessionName("w", idx), Role: "w", Index: idx, Host: host, State: st, StateSince: now.Add(-time.Minute)}
	}
	spread := func(n int) []herd.Role { return []herd.Role{{Name: "w", Replicas: n, Spread: true}} }
	live := map[string]bool{"a": true, "b": true, "c": true}
	three := []herd.Placement{old(0, "a"), old(1, "b"), old(2, "a")}
	cases := []struct {
		name     string
		roles    []herd.Role
		current  []herd.Placement
		sessions []herd.Session
		want     Change
	}{
		{"stop dropped a replica: its slot only is forgotten", spread(2), three,
			[]herd.Session{ses(0, "a", herd.StateRunning), ses(1, "b", herd.StateStopped), ses(2, "a", herd.StateRunning)},
			Change{Delete: []Slot{{"w", 1}}}},
		{"stopped, still wanted: placed again after the stop", spread(3), three,
			[]herd.Session{ses(1, "b", herd.StateStopped)}, Change{Put: []herd.Placement{p(1, "b")}}},
		{"stopped, placed again already: nothing", spread(3), []herd.Placement{old(0, "a"), p(1, "b"), old(2, "a")},
			[]herd.Session{ses(1, "b", herd.StateStopped)}, Change{}},
		{"resumed without a slot: slotted where it runs", spread(3), []herd.Placement{old(0, "a"), old(2, "a")},
			[]herd.Session{ses(1, "c", herd.StateRunning)}, Change{Put: []herd.Placement{p(1, "c")}}},
		{"scaled up: a stopped session's index goes back to its host", spread(3), []herd.Placement{old(0, "b"), old(2, "a")},
			[]herd.Session{ses(1, "b", herd.StateStopped)}, Change{Put: []herd.Placement{p(1, "b")}}},
		{"scaled down under a stopped slot: the highest running one goes", spread(1), three,
			[]herd.Session{ses(0, "a", herd.StateStopped)}, Change{Delete: []Slot{{"w", 0}, {"w", 2}}}},
	}
	for _, c := range cases {
		got := Assign(c.roles, c.current, c.sessions, live, nil, now)
		if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("[%s] change (-want +got):\n%s", c.name, diff)
		}
		// Applied, the change is a fixed point.
		next := map[int]herd.Placement{}
		for _, p := range c.current {
			next[p.Index] = p
		}
		for _, p := range got.Put {
			next[p.Index] = p
		}
		for _, d := range got.Delete {
			delete(next, d.Index)
		}
		var after []herd.Placement
		for _, p := range next {
			after = append(after, p)
		}
		if again := Assign(c.roles, after, c.sessions, live, nil, now); !again.Empty() {
			t.Errorf("[%s] expected no change on a second pass, got %+v", c.name, again)
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
	c := Assign(roles, nil, nil, live, nil, time.Now())
	count := map[string]int{}
	for _, p := range c.Put {
		count[p.Host]++
	}
	for h := range live {
		if count[h] != 10 {
			t.Errorf("[balance] expected 10 slots on %s, got %d", h, count[h])
		}
	}
	if again := Assign(roles, c.Put, nil, live, nil, time.Now()); !again.Empty() {
		t.Errorf("[fixed point] expected no change on a second pass, got %+v", again)
	}
}

// TestAssignFenced: a failover slot of a host that is down moves only once
// that host's lease has been released (ended plus the margin): until then
// the host may still be stopping its agent.
func TestAssignFenced(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	old := func(idx int, host string) herd.Placement {
		return herd.Placement{Role: "w", Index: idx, Host: host, AssignedAt: now.Add(-time.Hour)}
	}
	roles := []herd.Role{{Name: "w", Replicas: 2, Spread: true, Failover: true}}
	current := []herd.Placement{old(0, "a"), old(1, "b")}
	live := map[string]bool{"a": true, "c": true}
	cases := []struct {
		name     string
		released func(string) bool
		want     Change
	}{
		{"lease of the dead host not released: the slot waits", func(h string) bool { return h != "b" }, Change{}},
		{"released: the slot moves", func(string) bool { return true }, Change{Put: []herd.Placement{{Role: "w", Index: 1, Host: "c", AssignedAt: now}}}},
		{"an up host's lease released (clock skew): nothing moves from it", func(h string) bool { return h == "a" }, Change{}},
	}
	for _, c := range cases {
		got := Assign(roles, current, nil, live, c.released, now)
		if diff := cmp.Diff(c.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("[%s] change (-want +got):\n%s", c.name, diff)
		}
	}
}
