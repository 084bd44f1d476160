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
// given the hosts up now (live, by name) and the fleet's sessions. It is
// deterministic and stable:
//
//   - a slot keeps its host while that host is allowed (listed in hosts, or
//     any host for spread without hosts) and either up or the role has no
//     failover: no slot moves because a host joined, and a dead host's
//     slots wait for it unless failover = true; even then a slot moves
//     only once released(host) says that host's lease has ended plus the
//     margin (it has stopped its failover agents by then: see
//     hosts.Lease); a nil released judges by the heartbeat alone;
//   - a slot whose session is stopped does not count toward the replicas,
//     as an unplaced role's stopped session does not: stopping one session
//     (its replica dropped) forgets its slot, and neither relaunches it
//     nor stops another; while the slot is still wanted (a restart under
//     way, a reboot's stop) it is kept, placed again after the stop so its
//     host may relaunch it;
//   - a live session without a slot (resumed after its slot was
//     forgotten) gets one where it runs;
//   - a new slot goes back to the host of a stopped session of its index,
//     else, with spread, to the allowed up host holding the fewest of the
//     role's slots (ties: by name), else to the first up host of hosts in
//     the order listed; with no allowed host up, to the first listed host
//     (it starts when that host's daemon does), or stays unassigned for
//     spread without hosts;
//   - slots beyond the replicas (the highest first), and every slot of a
//     role that is no longer placed (or no longer exists), are forgotten.
func Assign(roles []herd.Role, current []herd.Placement, sessions []herd.Session, live map[string]bool, released func(host string) bool, now time.Time) Change {
	if released == nil {
		released = func(string) bool { return true }
	}
	var c Change
	byRole := map[string][]herd.Placement{}
	for _, p := range current {
		byRole[p.Role] = append(byRole[p.Role], p)
	}
	placed := map[string]bool{}
	for _, r := range roles {
		placed[r.Name] = r.Placed()
	}
	slots := map[string]map[int]herd.Session{}
	for _, s := range sessions {
		if !placed[s.Role] {
			continue
		}
		if slots[s.Role] == nil {
			slots[s.Role] = map[int]herd.Session{}
		}
		slots[s.Role][s.Index] = s
	}
	for _, r := range roles {
		if r.Placed() {
			assignRole(&c, r, byRole[r.Name], slots[r.Name], live, released, now)
		}
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

// assignRole adds to c the changes of one placed role; sessions are its
// sessions by index.
func assignRole(c *Change, r herd.Role, current []herd.Placement, sessions map[int]herd.Session, live map[string]bool, released func(string) bool, now time.Time) {
	a := &roleAssignment{c: c, r: r, sessions: sessions, live: live, released: released, now: now, want: min(r.Replicas, config.MaxReplicas),
		up: candidates(r, live), load: map[string]int{}, held: make(map[int]bool, len(current))}
	active, idle, unslotted := a.split(current)
	for _, p := range active {
		if a.kept < a.want {
			a.keep(p)
		} else {
			c.Delete = append(c.Delete, Slot{r.Name, p.Index})
		}
	}
	for _, s := range unslotted {
		if a.kept < a.want {
			a.adopt(s)
		}
	}
	for _, p := range idle {
		a.keepIdle(p)
	}
	a.placeRest()
}

// roleAssignment is one role's assignment on its way.
type roleAssignment struct {
	c        *Change
	r        herd.Role
	sessions map[int]herd.Session
	live     map[string]bool
	// released reports whether a host's lease ended plus the margin.
	released func(string) bool
	now      time.Time
	want     int
	// up are the candidate hosts: allowed and up now, in preference order.
	up []string
	// load counts the slots kept or placed per host.
	load map[string]int
	// held marks the indices kept; kept counts them.
	held map[int]bool
	kept int
	// move are the kept slots that must move to another host.
	move []int
}

// candidates are the allowed hosts up now, in preference order (the
// listed order, or by name).
func candidates(r herd.Role, live map[string]bool) []string {
	var up []string
	if len(r.Hosts) > 0 {
		for _, h := range r.Hosts {
			if live[h] {
				up = append(up, h)
			}
		}
		return up
	}
	for h, ok := range live {
		if ok {
			up = append(up, h)
		}
	}
	sort.Strings(up)
	return up
}

// allowed reports whether the role may run on host h.
func (a *roleAssignment) allowed(h string) bool {
	return len(a.r.Hosts) == 0 || slices.Contains(a.r.Hosts, h)
}

// stopped returns the session of slot idx when it is stopped.
func (a *roleAssignment) stopped(idx int) (herd.Session, bool) {
	s, ok := a.sessions[idx]
	return s, ok && s.State == herd.StateStopped
}

// split orders what there is to keep: slots whose session runs (or will:
// none yet) come first, then the unslotted live sessions, then the slots
// of stopped sessions, each by index; the first want are kept.
func (a *roleAssignment) split(current []herd.Placement) (active, idle []herd.Placement, unslotted []herd.Session) {
	slotted := map[int]bool{}
	for _, p := range current {
		slotted[p.Index] = true
		if _, ok := a.stopped(p.Index); ok {
			idle = append(idle, p)
		} else {
			active = append(active, p)
		}
	}
	byIndex := func(ps []herd.Placement) {
		sort.Slice(ps, func(i, j int) bool { return ps[i].Index < ps[j].Index })
	}
	byIndex(active)
	byIndex(idle)
	for idx, s := range a.sessions {
		if !slotted[idx] && s.State.HoldsSlot() && a.allowed(s.Host) {
			unslotted = append(unslotted, s)
		}
	}
	sort.Slice(unslotted, func(i, j int) bool { return unslotted[i].Index < unslotted[j].Index })
	return active, idle, unslotted
}

// keep keeps slot p, to move when its host is not allowed or, failing
// over, down (and its lease released) while another is up.
func (a *roleAssignment) keep(p herd.Placement) {
	a.kept++
	a.held[p.Index] = true
	if !a.allowed(p.Host) || (a.r.Failover && !a.live[p.Host] && a.released(p.Host) && len(a.up) > 0) {
		a.move = append(a.move, p.Index)
		return
	}
	a.load[p.Host]++
}

// adopt places an unslotted live session's slot where it runs.
func (a *roleAssignment) adopt(s herd.Session) {
	a.kept++
	a.held[s.Index] = true
	a.load[s.Host]++
	a.c.Put = append(a.c.Put, herd.Placement{Role: a.r.Name, Index: s.Index, Host: s.Host, AssignedAt: a.now})
}

// keepIdle keeps the slot of a stopped session while one is wanted, else
// deletes it.
func (a *roleAssignment) keepIdle(p herd.Placement) {
	if a.kept >= a.want {
		a.c.Delete = append(a.c.Delete, Slot{a.r.Name, p.Index})
		return
	}
	a.keep(p)
	// Still wanted after its session stopped: placed again, after the
	// stop, so that its host relaunches it (a host never relaunches a
	// slot whose session stopped after it was placed: the stop may
	// give the slot back).
	if s, _ := a.stopped(p.Index); !p.AssignedAt.After(s.StateSince) && !slices.Contains(a.move, p.Index) {
		at := a.now
		if !at.After(s.StateSince) {
			at = s.StateSince.Add(time.Millisecond)
		}
		a.c.Put = append(a.c.Put, herd.Placement{Role: a.r.Name, Index: p.Index, Host: p.Host, AssignedAt: at})
	}
}

// placeRest places the moved slots first (they ran somewhere), then new
// ones up to want, each by index.
func (a *roleAssignment) placeRest() {
	var free []int
	for i := 0; a.kept < a.want; i++ {
		if !a.held[i] {
			free = append(free, i)
			a.kept++
		}
	}
	sort.Ints(a.move)
	for _, idx := range append(a.move, free...) {
		h := pick(a.r, a.up, a.load)
		if s, ok := a.stopped(idx); ok && a.allowed(s.Host) && a.live[s.Host] && !slices.Contains(a.move, idx) {
			h = s.Host // back where it ran
		}
		if h == "" {
			continue
		}
		a.load[h]++
		at := a.now
		if s, ok := a.stopped(idx); ok && !at.After(s.StateSince) {
			at = s.StateSince.Add(time.Millisecond)
		}
		a.c.Put = append(a.c.Put, herd.Placement{Role: a.r.Name, Index: idx, Host: h, AssignedAt: at})
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
