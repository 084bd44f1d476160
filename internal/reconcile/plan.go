// Package reconcile computes, purely, what the supervisor must do to bring live sessions to the declared roles.
package reconcile

import (
	"sort"
	"time"

	"herd"
	"herd/internal/config"
)

// ActionKind names one step of a plan.
type ActionKind string

// Action kinds.
const (
	// Launch starts a fresh slot (no live session holds it).
	Launch ActionKind = "launch"
	// Relaunch starts the next incarnation of a crashed session whose backoff expired.
	Relaunch ActionKind = "relaunch"
	// Stop stops a live session that is no longer wanted (scale-down, role deleted).
	Stop ActionKind = "stop"
)

// Action is one step of a plan.
type Action struct {
	Kind    ActionKind
	Role    string
	Session string // session name; for Launch, the slot's name
	Index   int
	Reason  string // for Stop: herd.ReasonScaledDown or herd.ReasonRoleDeleted
}

// Demand is what the task queue asks of task roles beyond their declared
// replicas (role key max_replicas): a role's Want replicas when above
// its replicas (at most its max_replicas), and the sessions a scale-down
// must keep (they hold a task).
type Demand struct {
	Want map[string]int
	Keep map[string]bool
	// Known: the task queue has been read since the daemon started. Until
	// then a task role is never scaled down (which of its replicas hold a
	// task is not known yet).
	Known bool
}

// want is how many replicas role r is planned for.
func (d Demand) want(r herd.Role) int {
	want := r.Replicas
	if w := d.Want[r.Name]; r.MaxReplicas > 0 && w > want {
		want = min(w, r.MaxReplicas)
	}
	return min(want, config.MaxReplicas)
}

// Plan is PlanWith no demand.
func Plan(roles []herd.Role, sessions []herd.Session, now time.Time) []Action {
	return PlanWith(roles, sessions, now, Demand{})
}

// PlanWith returns the actions that move sessions toward roles at time now.
// sessions are this host's sessions only. The result is deterministic:
// stops first, then relaunches, then launches, each ordered by name. A role
// is planned for at most config.MaxReplicas replicas, whatever it says (one
// stored before the limit existed), and the work is linear in the replicas
// and sessions.
//
// A task role is planned for its demand's Want when above its replicas,
// and a scale-down never stops a session the demand keeps (one holding a
// task): the highest indices of the others go first.
func PlanWith(roles []herd.Role, sessions []herd.Session, now time.Time, d Demand) []Action {
	// Sessions are referred to by index: a plan over an idle fleet copies
	// no session.
	byRole := make(map[string][]int, len(roles))
	for i := range sessions {
		byRole[sessions[i].Role] = append(byRole[sessions[i].Role], i)
	}
	declared := make(map[string]bool, len(roles))
	var stops, relaunches, launches []Action

	var holders []int
	taken := map[int]bool{}
	for _, r := range roles {
		declared[r.Name] = true
		holders = holders[:0]
		clear(taken)
		for _, i := range byRole[r.Name] {
			if sessions[i].State.HoldsSlot() {
				holders = append(holders, i)
				taken[sessions[i].Index] = true
			}
		}
		sort.Slice(holders, func(a, b int) bool { return sessions[holders[a]].Index < sessions[holders[b]].Index })

		want := d.want(r)
		// Scale down: the highest indices go first, none the demand
		// keeps.
		for i := len(holders) - 1; i >= 0 && len(holders) > want; i-- {
			s := &sessions[holders[i]]
			if d.Keep[s.Name] || (r.Tasks && !d.Known) {
				continue
			}
			stops = append(stops, Action{Kind: Stop, Role: r.Name, Session: s.Name, Index: s.Index, Reason: herd.ReasonScaledDown})
			holders = append(holders[:i], holders[i+1:]...)
		}
		// Scale up: the lowest free indices.
		for idx, n := 0, len(holders); n < want; idx++ {
			if taken[idx] {
				continue
			}
			launches = append(launches, Action{Kind: Launch, Role: r.Name, Session: herd.SessionName(r.Name, idx), Index: idx})
			n++
		}
		for _, i := range holders {
			if s := &sessions[i]; due(*s, now) {
				relaunches = append(relaunches, Action{Kind: Relaunch, Role: r.Name, Session: s.Name, Index: s.Index})
			}
		}
	}
	// Live sessions of roles no longer declared.
	for i := range sessions {
		if s := &sessions[i]; !declared[s.Role] && s.State.Live() {
			stops = append(stops, Action{Kind: Stop, Role: s.Role, Session: s.Name, Index: s.Index, Reason: herd.ReasonRoleDeleted})
		}
	}
	byName := func(a []Action) {
		sort.SliceStable(a, func(i, j int) bool { return a[i].Session < a[j].Session })
	}
	byName(stops)
	byName(relaunches)
	byName(launches)
	return append(append(stops, relaunches...), launches...)
}

// due reports whether a dead slot's replacement should launch now.
func due(s herd.Session, now time.Time) bool {
	switch s.State {
	case herd.StateCrashed:
		return true
	case herd.StateBackoff:
		return s.BackoffUntil == nil || !now.Before(*s.BackoffUntil)
	}
	return false
}
