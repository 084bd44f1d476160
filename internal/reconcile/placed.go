package reconcile

import (
	"sort"
	"time"

	"herd"
	"herd/internal/config"
)

// PlanPlaced returns the actions for this host's share of placed roles:
// mine holds, by role, the slot indices placed on this host, each with
// when it was placed; sessions are this host's sessions of those roles.
// The placement leader decides which slots the replicas are (see
// placement.Assign): a slot placed here with no session of this host
// holding it is launched (whether another host still holds it is the
// launcher's to check, under the slot's lock) — unless its session here
// stopped after the slot was placed, since that stop may give the slot
// back (herd stop drops a replica) and only the leader's next pass says;
// a crashed one is relaunched when due; a session holding a slot that is
// no longer placed here stops: scaled down beyond the replicas, else
// moved. The order is Plan's: stops, relaunches, launches, each by name.
func PlanPlaced(roles []herd.Role, mine map[string]map[int]time.Time, sessions []herd.Session, now time.Time) []Action {
	byRole := make(map[string][]herd.Session)
	for _, s := range sessions {
		byRole[s.Role] = append(byRole[s.Role], s)
	}
	var stops, relaunches, launches []Action
	for _, r := range roles {
		want := min(r.Replicas, config.MaxReplicas)
		taken := map[int]bool{}
		stoppedAt := map[int]time.Time{}
		for _, s := range byRole[r.Name] {
			if !s.State.HoldsSlot() {
				stoppedAt[s.Index] = s.StateSince
				continue
			}
			if _, ok := mine[r.Name][s.Index]; !ok {
				reason := herd.ReasonMoved
				if s.Index >= want {
					reason = herd.ReasonScaledDown
				}
				stops = append(stops, Action{Kind: Stop, Role: r.Name, Session: s.Name, Index: s.Index, Reason: reason})
				continue
			}
			taken[s.Index] = true
			if due(s, now) {
				relaunches = append(relaunches, Action{Kind: Relaunch, Role: r.Name, Session: s.Name, Index: s.Index})
			}
		}
		for idx, at := range mine[r.Name] {
			if taken[idx] {
				continue
			}
			if since, ok := stoppedAt[idx]; ok && !at.After(since) {
				continue
			}
			launches = append(launches, Action{Kind: Launch, Role: r.Name, Session: herd.SessionName(r.Name, idx), Index: idx})
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
