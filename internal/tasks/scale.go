package tasks

import (
	"maps"
	"strings"
	"time"

	"herd"
	"herd/internal/reconcile"
)

// scale computes what the queue asks of each task role with
// max_replicas: the replicas its held and queued tasks need, kept for
// scale_down_after once fewer are needed, so that a replica the queue
// started waits that long without a task before it is stopped. The
// reconciler reads it (Demand); it is woken when it changed.
func (m *Manager) scale(w world, now time.Time) {
	held := map[string]int{}
	keep := map[string]bool{}
	m.mu.Lock()
	for k := range m.busy {
		// A replica relaunched out of a task's worktree is not stopped
		// under the relaunch.
		if name, ok := strings.CutPrefix(k, "session "); ok {
			keep[name] = true
		}
	}
	m.mu.Unlock()
	for _, t := range w.tasks {
		if t.State.Holds() {
			held[t.Role]++
			keep[t.Session] = true
		}
	}
	m.mu.Lock()
	changed := !maps.Equal(keep, m.keep) || !m.known
	m.keep, m.known = keep, true
	for name, r := range w.roles {
		if r.MaxReplicas <= 0 {
			continue
		}
		need := min(held[name]+w.queued[name], r.MaxReplicas)
		after := r.ScaleDownAfter
		if after <= 0 {
			after = herd.DefaultScaleDownAfter
		}
		// wantUntil is when the demand, found lower than wanted, drops
		// (zero: it is not lower).
		switch cur := m.want[name]; {
		case need >= cur:
			if need != cur {
				changed = true
			}
			m.want[name] = need
			delete(m.wantUntil, name)
		case m.wantUntil[name].IsZero():
			m.wantUntil[name] = now.Add(after)
		case !now.Before(m.wantUntil[name]):
			m.want[name] = need
			delete(m.wantUntil, name)
			changed = true
		}
	}
	for name := range m.want {
		if _, ok := w.roles[name]; !ok {
			delete(m.want, name)
			delete(m.wantUntil, name)
			changed = true
		}
	}
	m.mu.Unlock()
	if changed && m.o.Reconcile != nil {
		m.o.Reconcile()
	}
}

// Demand is what the queue asks of the task roles, for the reconciler.
func (m *Manager) Demand() reconcile.Demand {
	m.mu.Lock()
	defer m.mu.Unlock()
	return reconcile.Demand{Want: maps.Clone(m.want), Keep: maps.Clone(m.keep), Known: m.known}
}

// nextWake is how long until the loop's next deadline: a demand that
// may drop or a reaction that may go unanswered (0: none; the safety
// tick then).
func (m *Manager) nextWake(now time.Time) time.Duration {
	next := m.nextScaleDown(now)
	m.mu.Lock()
	at := m.escalateAt
	m.mu.Unlock()
	if !at.IsZero() {
		// A moment after the deadline, so the round sees it passed; one
		// past already (its step failed) is tried again at this pace.
		d := max(at.Sub(now)+10*time.Millisecond, 250*time.Millisecond)
		if next == 0 || d < next {
			next = d
		}
	}
	return next
}

// nextScaleDown is how long until the queue's demand may drop (0:
// nothing waits to drop).
func (m *Manager) nextScaleDown(now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Duration
	for _, until := range m.wantUntil {
		if d := until.Sub(now); d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next
}
