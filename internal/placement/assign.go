// Package placement assigns the slots of placed roles to the fleet's hosts:
// a pure, stable assignment and the leader that applies it.
package placement

import (
	"slices"
	"sort"
	"time"

	"herd"
	"herd/internal/config"
)

// Slot names one replica slot of a role.
type Slot struct {
	Role  string
	Index int
}

// Change is what one assignment pass writes: placements to put (new or
// moved slots) and slots to forget (beyond the replicas, or of roles no
// longer placed).
type Change struct {
	Put    []herd.Placement
	Delete []Slot
}

// Empty reports whether c changes nothing.
func (c Change) Empty() bool { return len(c.Put) == 0 && len(c.Delete) == 0 }

// Assign returns what moves current toward the placement roles ask for,
// given the hosts up now (live, by name). It is deterministic and stable:
//
//   - a slot keeps its host while that host is allowed (listed in hosts, or
//     any host for spread without hosts) and either up or the role has no
//     failover: no slot moves because a host joined, and a dead host's
//     slots wait for it unless failover = true;
//   - a new slot goes, with spread, to the allowed up host holding the
//     fewest of the role's slots (ties: by name), else to the first up
//     host of hosts in the order listed; with no allowed host up, to the
//     first listed host (it starts when that host's daemon does), or
//     stays unassigned for spread without hosts;
//   - slots at or beyond the replicas, and every slot of a role that is
//     no longer placed (or no longer exists), are forgotten.
func Assign(roles []herd.Role, current []herd.Placement, live map[string]bool, now time.Time) Change {
	var c Change
	byRole := map[string][]herd.Placement{}
	for _, p := range current {
		byRole[p.Role] = append(byRole[p.Role], p)
	}
	placed := map[string]bool{}
	for _, r := range roles {
		if !r.Placed() {
			continue
		}
		placed[r.Name] = true
		assignRole(&c, r, byRole[r.Name], live, now)
	}
	for _, p := range current {
		if !placed[p.Role] {
			c.Delete = append(c.Delete, Slot{p.Role, p.Index})
		}
	}
	sort.Slice(c.Delete, func(i, j int) bool {
		a, b := c.Delete[i], c.Delete[j]
		return a.Role < b.Role || (a.Role == b.Role && a.Index < b.Index)
	})
	return c
}

// assignRole adds to c the changes of one placed role.
func assignRole(c *Change, r herd.Role, current []herd.Placement, live map[string]bool, now time.Time) {
	want := min(r.Replicas, config.MaxReplicas)
	allowed := func(h string) bool { return len(r.Hosts) == 0 || slices.Contains(r.Hosts, h) }
	// Candidates: allowed hosts up now, in preference order (the listed
	// order, or by name).
	var up []string
	if len(r.Hosts) > 0 {
		for _, h := range r.Hosts {
			if live[h] {
				up = append(up, h)
			}
		}
	} else {
		for h, ok := range live {
			if ok {
				up = append(up, h)
			}
		}
		sort.Strings(up)
	}
	load := map[string]int{}
	held := make(map[int]bool, len(current))
	var move []int
	for _, p := range current {
		switch {
		case p.Index >= want:
			c.Delete = append(c.Delete, Slot{r.Name, p.Index})
		case !allowed(p.Host) || (r.Failover && !live[p.Host] && len(up) > 0):
			move = append(move, p.Index)
			held[p.Index] = true
		default:
			held[p.Index] = true
			load[p.Host]++
		}
	}
	var free []int
	for i := 0; i < want; i++ {
		if !held[i] {
			free = append(free, i)
		}
	}
	// Moved slots first (they ran somewhere), then new ones, each by index.
	sort.Ints(move)
	for _, idx := range append(move, free...) {
		h := pick(r, up, load)
		if h == "" {
			continue
		}
		load[h]++
		c.Put = append(c.Put, herd.Placement{Role: r.Name, Index: idx, Host: h, AssignedAt: now})
	}
}

// pick chooses the host of one slot of r among the hosts up (in
// preference order), given the slots each already holds.
func pick(r herd.Role, up []string, load map[string]int) string {
	if len(up) == 0 {
		if len(r.Hosts) > 0 {
			return r.Hosts[0]
		}
		return ""
	}
	if !r.Spread {
		return up[0]
	}
	best := ""
	for _, h := range up {
		if best == "" || load[h] < load[best] || (load[h] == load[best] && h < best) {
			best = h
		}
	}
	return best
}
