package slots

import (
	"context"
	"errors"
	"slices"
	"time"

	"herd"
	"herd/internal/reconcile"
	"herd/internal/store"
)

// Reconcile runs one plan; it returns the earliest pending backoff
// deadline (zero when none), so the loop wakes exactly then.
func (sl *Slots) Reconcile(ctx context.Context) (next time.Time) {
	roles, sessions, pl, err := sl.read(ctx)
	// With the store away (an outage: the writer journals locally) the
	// placements cannot be read: the placed roles' slots wait — none is
	// launched or stopped on an old placement — and every other role is
	// reconciled as ever, so a crash is still relaunched with its backoff.
	away := err != nil && (errors.Is(err, store.ErrAway) || errors.Is(err, store.ErrUnreachable))
	if err != nil && !away {
		if ctx.Err() == nil { // a shutdown is no error
			sl.o.Log.Error("reconcile: read store", "err", err)
		}
		return time.Time{}
	}
	if was := sl.placementsAway.Swap(away); was != away {
		if away {
			sl.o.Log.Warn("reconcile: the placements cannot be read while the store is away; placed roles wait", "err", err)
		} else {
			sl.o.Log.Info("reconcile: the placements are read again")
		}
	}
	byName := make(map[string]herd.Role, len(roles)+len(pl.roles))
	for _, r := range roles {
		byName[r.Name] = r
	}
	now := time.Now()
	// The next wake-up is taken against the plan's own clock: a backoff that
	// falls due while this round's launches run must not wait for a tick.
	for _, s := range sessions {
		if s.State == herd.StateBackoff && s.BackoffUntil != nil && s.BackoffUntil.After(now) {
			if next.IsZero() || s.BackoffUntil.Before(next) {
				next = *s.BackoffUntil
			}
		}
	}
	for _, r := range pl.roles {
		byName[r.Name] = r
	}
	sl.endMoved(ctx, pl.moved)
	var launches []reconcile.Action
	var demand reconcile.Demand
	if sl.o.Demand != nil {
		demand = sl.o.Demand()
	}
	plan := reconcile.PlanWith(roles, sl.holdRestarting(pl.unplaced(sessions)), now, demand)
	if !away {
		plan = append(plan, reconcile.PlanPlaced(pl.roles, pl.mine, pl.placed(sessions), now)...)
	}
	for _, a := range plan {
		if ctx.Err() != nil {
			return time.Time{}
		}
		if a.Kind == reconcile.Stop {
			a.Reason = pl.reason(a.Role, a.Reason)
			sl.stopInBackground(ctx, a)
			continue
		}
		launches = append(launches, a)
	}
	launches, opens := sl.gate(byName, launches, now)
	if !opens.IsZero() && (next.IsZero() || opens.Before(next)) {
		next = opens
	}
	sl.launchWave(ctx, byName, launches, pl.gens)
	if ctx.Err() != nil {
		return time.Time{}
	}
	return next
}

// beginRestart marks a restart of session name as under way; the
// returned func ends the mark.
func (sl *Slots) beginRestart(name string) (end func()) {
	sl.mu.Lock()
	sl.restarting[name]++
	sl.mu.Unlock()
	return func() {
		sl.mu.Lock()
		if sl.restarting[name]--; sl.restarting[name] <= 0 {
			delete(sl.restarting, name)
		}
		sl.mu.Unlock()
	}
}

// holdRestarting returns sessions with each one whose restart is under
// way shown holding its slot: between the restart's stop and its launch
// the session is stopped, and a plan made then would launch another slot
// in its place (a task role's scaled replicas: the lowest free index,
// then stop the restarted one as one too many). The listing is shared,
// never changed: it is copied only when a restart is under way.
func (sl *Slots) holdRestarting(sessions []herd.Session) []herd.Session {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if len(sl.restarting) == 0 {
		return sessions
	}
	var out []herd.Session
	for i, s := range sessions {
		if sl.restarting[s.Name] == 0 || s.State.HoldsSlot() {
			continue
		}
		if out == nil {
			out = slices.Clone(sessions)
		}
		out[i].State = herd.StatePending
	}
	if out == nil {
		return sessions
	}
	return out
}

// stopInBackground runs a planned stop on its own goroutine: a stop may
// wait out the grace period of an agent that ignores SIGTERM, and neither
// the other stops of a scale-down nor the launches of other roles wait for
// it. A session whose stop is already under way is skipped.
func (sl *Slots) stopInBackground(ctx context.Context, a reconcile.Action) {
	release, underWay := sl.claimStop(a.Session)
	if underWay != nil {
		return
	}
	sl.group.Go("reconcile stop", func() {
		defer release()
		err := sl.slottedStop(ctx, StopRequest{Name: a.Session, Reason: a.Reason})
		var moved *notHereError
		if errors.As(err, &moved) {
			// Planned on a listing older than the move (this host was
			// away): the other host owns it now; nothing of it is here.
			sl.o.Log.Info("reconcile: session moved to another host; not stopped here", "session", a.Session, "host", moved.host)
			sl.st.Invalidate()
			return
		}
		if err != nil && !errors.Is(err, ErrAlreadyStopped) && !errors.Is(err, errShuttingDown) {
			sl.o.Log.Error("reconcile", "action", a.Kind, "session", a.Session, "err", err)
		}
	})
}

// maxParallelStops bounds the stops that run at once: each may wait out a
// grace period, and each ends with a tmux listing and a store write.
const maxParallelStops = 32

// claimStop marks the bounded stop of session name as under way; release
// ends the claim. When one is under way already, underWay is closed at its
// end and release is nil.
func (sl *Slots) claimStop(name string) (release func(), underWay <-chan struct{}) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if done, ok := sl.stopsUnderWay[name]; ok {
		return nil, done
	}
	done := make(chan struct{})
	sl.stopsUnderWay[name] = done
	return func() {
		sl.mu.Lock()
		delete(sl.stopsUnderWay, name)
		sl.mu.Unlock()
		close(done)
	}, nil
}

// BoundedStop is Stop, run once one of the stop slots is free, and once
// per session at a time: a caller that finds a stop of the same session
// under way (a role deletion meeting the reconciler's scale-down) waits
// for it instead of taking a second slot.
func (sl *Slots) BoundedStop(ctx context.Context, req StopRequest) error {
	release, underWay := sl.claimStop(req.Name)
	if underWay != nil {
		sl.stopsWaiting.Add(1)
		defer sl.stopsWaiting.Add(-1)
		<-underWay
		return ErrAlreadyStopped
	}
	defer release()
	return sl.slottedStop(ctx, req)
}

// slottedStop is stop once a stop slot is free. The wait has no deadline
// of its own: each stop holding a slot ends within its grace.
func (sl *Slots) slottedStop(ctx context.Context, req StopRequest) error {
	sl.stopSlots <- struct{}{}
	defer func() { <-sl.stopSlots }()
	return sl.Stop(ctx, req)
}

// read returns the unplaced roles this host reconciles, this host's
// sessions, and what it needs of placed roles (see placement).
func (sl *Slots) read(ctx context.Context) (roles []herd.Role, sessions []herd.Session, pl placedView, err error) {
	all, sessions, err := sl.readAll(ctx)
	if err != nil {
		return nil, nil, pl, err
	}
	roles, pl, err = sl.placement(ctx, all, sessions)
	return roles, sessions, pl, err
}

// readAll returns every role and this host's sessions, from the live set
// status keeps: no read of the whole table while nothing was written, and
// no copy of it while its generation holds (a quiet fleet's round copies
// nothing; the copy kept is never changed, only replaced).
func (sl *Slots) readAll(ctx context.Context) (roles []herd.Role, sessions []herd.Session, err error) {
	sl.listMu.Lock()
	defer sl.listMu.Unlock()
	roles, sessions, live, gen, changed, err := sl.st.ListingSince(ctx, sl.listed.gen)
	if err != nil {
		return nil, nil, err
	}
	if changed {
		sl.listed.gen, sl.listed.roles, sl.listed.sessions, sl.listed.live = gen, roles, sessions, live
	}
	return sl.listed.roles, sl.listed.sessions, nil
}

// StopSlotsHeld is the number of bounded stops running now.
func (sl *Slots) StopSlotsHeld() int { return len(sl.stopSlots) }

// StopsWaiting is the number of bounded stops waiting, without a slot, for
// another stop of the same session to end.
func (sl *Slots) StopsWaiting() int { return int(sl.stopsWaiting.Load()) }

// gate drops the launches a gate holds back at now, and returns the
// others and the earliest time a gate holding one opens (zero: none held).
// A held slot keeps its state: its restart count and backoff are untouched.
func (sl *Slots) gate(roles map[string]herd.Role, launches []reconcile.Action, now time.Time) (kept []reconcile.Action, opens time.Time) {
	if len(sl.o.Gates) == 0 {
		return launches, time.Time{}
	}
	kept = launches[:0:0]
	for _, a := range launches {
		until, why := Held(sl.o.Gates, roles[a.Role], now)
		if until.IsZero() {
			kept = append(kept, a)
			continue
		}
		if opens.IsZero() || until.Before(opens) {
			opens = until
		}
		sl.noteHeld(a.Session, until, why)
	}
	return kept, opens
}

// Held asks each gate about a launch of r at now: the latest time one
// holds it until, and why; zero when none holds it.
func Held(gates []Gate, r herd.Role, now time.Time) (until time.Time, why string) {
	for _, g := range gates {
		if u, w := g.LaunchHeld(r, now); u.After(until) {
			until, why = u, w
		}
	}
	return until, why
}

// noteHeld logs a held launch once per hold, not at every round.
func (sl *Slots) noteHeld(session string, until time.Time, why string) {
	sl.mu.Lock()
	seen := sl.held[session].Equal(until)
	sl.held[session] = until
	sl.mu.Unlock()
	if !seen {
		sl.o.Log.Info("launch held", "session", session, "until", until, "why", why)
	}
}
