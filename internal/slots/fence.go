package slots

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herd"
	"herd/internal/hosts"
	"herd/internal/loop"
	"herd/internal/status"
	"herd/internal/store"
)

// Lease is this daemon's lease as slots needs it (hosts.Lease): a failover
// slot is launched only while the lease is held, and Fence stops the
// failover agents once it is not.
type Lease interface {
	// Held reports whether the lease is held at now.
	Held(now time.Time) bool
	// Duration is fleet.lease.
	Duration() time.Duration
}

var _ Lease = (*hosts.Lease)(nil)

// errFenced means a failover slot was not launched: this host's lease is
// not held, or the slot's placement (its fencing token) is not this
// host's any more.
var errFenced = errors.New("fenced: this host's lease is not held (the store out of reach), or the slot is placed on another host")

// fenced reports whether launches of role go through the fence: a placed
// role that fails over, on a daemon that holds a lease.
func (sl *Slots) fenced(role herd.Role) bool {
	return sl.o.Lease != nil && role.Placed() && role.Failover
}

// fenceCheck allows one launch of a failover slot: the lease is held here,
// and, in one serializable transaction of the store, which the placement
// leader's moves are serialized with, this host's lease has not ended by
// the database's clock, the slot is placed here with the generation the
// reconciler read (req.Generation, when set), and no other host holds the
// slot unless that host's lease ended more than the margin ago (it has
// stopped its copy by then). A slot with no placement (a session resumed
// after its slot was forgotten) launches only where no other host holds
// it. It returns the placement's generation (0: none).
func (sl *Slots) fenceCheck(ctx context.Context, req LaunchRequest) (int64, error) {
	if !sl.o.Lease.Held(time.Now()) {
		return 0, errFenced
	}
	me := sl.st.Host()
	margin := hosts.Margin(sl.o.Lease.Duration())
	var gen int64
	err := sl.st.Store().Update(ctx, func(tx store.Tx) error {
		gen = 0
		dbNow, err := tx.Now()
		if err != nil {
			return err
		}
		self, err := tx.Host(me)
		if err != nil {
			return err
		}
		if !self.LeaseUntil.After(dbNow) {
			return errFenced
		}
		p, err := tx.Placement(req.Role.Name, req.Index)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return err
		case p.Host != me || (req.Generation != 0 && p.Generation != req.Generation):
			return errFenced
		default:
			gen = p.Generation
		}
		s, err := tx.Session(req.Name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.Host == me || !s.State.HoldsSlot() {
			return nil
		}
		if gen == 0 {
			return errFenced // unplaced, and another host holds it
		}
		other, err := tx.Host(s.Host)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !hosts.Released(other, dbNow, margin) {
			return errFenced
		}
		return nil
	})
	return gen, err
}

// noteFenceable remembers the incarnation just launched of a failover
// slot: Fence ends it even when the store cannot be read to list it.
func (sl *Slots) noteFenceable(inc herd.Incarnation) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.fenceable == nil {
		sl.fenceable = map[string]herd.Incarnation{}
	}
	sl.fenceable[inc.Session] = inc
}

// Fence stops this host's agents of failover roles: its lease is not held
// (the store out of reach for fleet.lease), so another host may soon take
// their slots. Each is taken down through the stop path's takedown
// (identity verified before every signal; grace between TERM and KILL)
// and recorded stopped with reason fenced, resumable; a record the store
// cannot take now is written by RecordFenced once it is back (until then
// the death is the stop's, not a crash). Agents of other roles are left
// alone. The sessions come from the live set, else from the last listing
// and the launches of this daemon: the store need not answer. It returns
// how many agents it took down.
func (sl *Slots) Fence(ctx context.Context, grace time.Duration) int {
	targets := sl.fenceTargets(ctx)
	var n int
	done := make(chan bool, len(targets))
	loop.Each(maxParallelStops, targets, func(inc herd.Incarnation) {
		err := sl.fenceOne(ctx, inc, grace)
		if err != nil && ctx.Err() == nil && !errors.Is(err, errShuttingDown) {
			sl.o.Log.Error("fence: stop a failover agent", "session", inc.Session, "incarnation", inc.ID, "err", err)
		}
		done <- err == nil
	})
	close(done)
	for ok := range done {
		if ok {
			n++
		}
	}
	return n
}

// fenceTargets lists the open incarnations of this host's failover
// sessions not yet fenced.
func (sl *Slots) fenceTargets(ctx context.Context) []herd.Incarnation {
	rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	roles, _, live, err := sl.st.Listing(rctx)
	cancel()
	if err != nil {
		sl.listMu.Lock()
		roles, live = sl.listed.roles, sl.listed.live
		sl.listMu.Unlock()
	}
	failover := map[string]bool{}
	for _, r := range roles {
		failover[r.Name] = sl.fenced(r)
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	seen := map[string]bool{}
	var out []herd.Incarnation
	add := func(inc herd.Incarnation) {
		if !seen[inc.ID] && sl.fencedPending[inc.ID] == "" && inc.Host == sl.st.Host() && inc.EndedAt == nil {
			seen[inc.ID] = true
			out = append(out, inc)
		}
	}
	for _, l := range live {
		if failover[l.S.Role] && l.S.Host == sl.st.Host() {
			add(l.Inc)
		}
	}
	for _, inc := range sl.fenceable {
		add(inc)
	}
	return out
}

// fenceOne takes one failover agent down and records it fenced. The
// takedown stays open (deaths are the stop's) until the record is
// written, here or by RecordFenced.
func (sl *Slots) fenceOne(ctx context.Context, inc herd.Incarnation, grace time.Duration) error {
	if !sl.ops.Begin() {
		return errShuttingDown
	}
	defer sl.ops.End()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace+stopSlack)
	defer cancel()
	sl.st.BeginTakedown(inc.ID, "")
	killed, err := sl.td.Terminate(ctx, inc, grace)
	if err != nil {
		sl.st.EndTakedown(inc.ID, "")
		sl.o.Prober.Kick()
		return err
	}
	sl.o.Prober.Unwatch(inc.ID)
	sl.mu.Lock()
	if sl.fencedPending == nil {
		sl.fencedPending = map[string]string{}
	}
	sl.fencedPending[inc.ID] = inc.Session
	delete(sl.fenceable, inc.Session)
	sl.mu.Unlock()
	sl.o.Log.Warn("fenced: failover agent stopped, the lease is lost", "session", inc.Session, "incarnation", inc.ID, "killed", killed)
	sl.recordFenced(ctx, inc.ID, inc.Session)
	return nil
}

// RecordFenced writes the fenced stops the store could not take when they
// happened; the daemon calls it while its lease is held.
func (sl *Slots) RecordFenced(ctx context.Context) {
	sl.mu.Lock()
	pending := make(map[string]string, len(sl.fencedPending))
	for id, name := range sl.fencedPending {
		pending[id] = name
	}
	sl.mu.Unlock()
	for id, name := range pending {
		sl.recordFenced(ctx, id, name)
	}
}

// recordFenced records one fenced stop: the session stopped with reason
// fenced, if inc is still its incarnation (else another host took the
// slot, or the session was stopped meanwhile: nothing to record here).
func (sl *Slots) recordFenced(ctx context.Context, inc, name string) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	unlock, err := sl.st.LockCtx(ctx, name)
	if err != nil {
		return // a launch or stop holds the slot; next time
	}
	err = sl.st.Stopped(ctx, status.Stop{Name: name, Incarnation: inc, Reason: herd.ReasonFenced, Kind: herd.EventStopped,
		Message: fmt.Sprintf("the lease was not renewed for %v: the store out of reach", sl.o.Lease.Duration())})
	unlock()
	if err != nil && !errors.Is(err, ErrAlreadyStopped) && !errors.Is(err, store.ErrNotFound) {
		return // the store is still away: kept for the next try
	}
	sl.mu.Lock()
	delete(sl.fencedPending, inc)
	sl.mu.Unlock()
	sl.st.EndTakedown(inc, "")
}

// FencedPending is the number of fenced stops not yet recorded.
func (sl *Slots) FencedPending() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return len(sl.fencedPending)
}
