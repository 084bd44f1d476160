package slots

import (
	"context"
	"errors"
	"time"

	"herd"
	"herd/internal/hosts"
	"herd/internal/reconcile"
	"herd/internal/store"
)

// hostTimeout is Options.HostTimeout, 30s when unset.
func (sl *Slots) hostTimeout() time.Duration {
	if sl.o.HostTimeout > 0 {
		return sl.o.HostTimeout
	}
	return 30 * time.Second
}

// placedView is what one reconcile reads of placed roles.
type placedView struct {
	// roles are the placed roles (any host may have declared them).
	roles []herd.Role
	// mine holds, by role, the slot indices placed on this host, with
	// when each was placed.
	mine map[string]map[int]time.Time
	// gens holds, by role, the generations (fencing tokens) of the slots
	// placed on this host.
	gens map[string]map[int]int64
	// moved are incarnations still open on this host whose session now
	// runs on another host (failover took the slot while this daemon was
	// away): they are ended here.
	moved []herd.Incarnation
	// elsewhere holds the unplaced roles another host declared: a session
	// of one here (the role was placed before) stops as moved, not as
	// deleted.
	elsewhere map[string]bool
}

// reason is the reason a planned stop of a session of role records.
func (pl placedView) reason(role, planned string) string {
	if planned == herd.ReasonRoleDeleted && pl.elsewhere[role] {
		return herd.ReasonMoved
	}
	return planned
}

// isPlaced reports whether role names a placed role.
func (pl placedView) isPlaced(role string) bool {
	for _, r := range pl.roles {
		if r.Name == role {
			return true
		}
	}
	return false
}

// unplaced keeps the sessions that are not of a placed role.
func (pl placedView) unplaced(sessions []herd.Session) []herd.Session {
	if len(pl.roles) == 0 {
		return sessions
	}
	var out []herd.Session
	for _, s := range sessions {
		if !pl.isPlaced(s.Role) {
			out = append(out, s)
		}
	}
	return out
}

// placed keeps the sessions of placed roles.
func (pl placedView) placed(sessions []herd.Session) []herd.Session {
	var out []herd.Session
	for _, s := range sessions {
		if pl.isPlaced(s.Role) {
			out = append(out, s)
		}
	}
	return out
}

// placement splits roles into the unplaced ones this host reconciles
// and the placed ones, and reads this host's placements — and, when a
// role may fail over, the open incarnations of this host whose session
// moved away. A fleet without placed roles pays no query for it.
func (sl *Slots) placement(ctx context.Context, all []herd.Role, sessions []herd.Session) (own []herd.Role, pl placedView, err error) {
	var unplaced []herd.Role
	for _, r := range all {
		switch {
		case r.Placed():
			pl.roles = append(pl.roles, r)
		case sl.ownsRole(r):
			unplaced = append(unplaced, r)
		default:
			if pl.elsewhere == nil {
				pl.elsewhere = map[string]bool{}
			}
			pl.elsewhere[r.Name] = true
		}
	}
	own = sl.ownedRoles(unplaced)
	if len(pl.roles) == 0 {
		return own, pl, nil
	}
	err = sl.st.Store().View(ctx, func(tx store.Tx) error {
		pl.mine, pl.gens, pl.moved = nil, nil, nil
		return sl.readPlacement(tx, &pl, sessions)
	})
	return own, pl, err
}

// readPlacement reads into pl this host's placements and, when one of
// pl's roles fails over, this host's open incarnations whose session now
// runs on another host.
func (sl *Slots) readPlacement(tx store.Tx, pl *placedView, sessions []herd.Session) error {
	failover := false
	for _, r := range pl.roles {
		failover = failover || r.Failover
	}
	ps, err := tx.PlacementsOnHost(sl.st.Host())
	if err != nil {
		return err
	}
	pl.mine = map[string]map[int]time.Time{}
	pl.gens = map[string]map[int]int64{}
	for _, p := range ps {
		if pl.mine[p.Role] == nil {
			pl.mine[p.Role] = map[int]time.Time{}
			pl.gens[p.Role] = map[int]int64{}
		}
		pl.mine[p.Role][p.Index] = p.AssignedAt
		pl.gens[p.Role][p.Index] = p.Generation
	}
	if !failover {
		return nil
	}
	open, err := tx.OpenIncarnationsOnHost(sl.st.Host())
	if err != nil {
		return err
	}
	here := make(map[string]bool, len(sessions))
	for _, s := range sessions {
		here[s.Name] = true
	}
	for _, inc := range open {
		if here[inc.Session] {
			continue
		}
		s, err := tx.Session(inc.Session)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if s.Host != sl.st.Host() && s.Incarnation != inc.ID {
			pl.moved = append(pl.moved, inc)
		}
	}
	return nil
}

// launchPlaced launches a slot placed on this host (gen: its generation as
// read). A slot another host still holds waits for that host to stop it
// (its placement moved), unless that host is stale and the role fails
// over: then this host takes the slot (the old host, back, ends its copy:
// see endMoved). With a lease, "stale" is the lease's word: its end plus
// the margin, by the database's clock (see fenceCheck).
func (sl *Slots) launchPlaced(ctx context.Context, role herd.Role, a reconcile.Action, gen int64) error {
	req := reconcileLaunch(role, a)
	req.Generation = gen
	if a.Kind != reconcile.Launch {
		return sl.launch(ctx, req)
	}
	var prior herd.Session
	var from string
	err := sl.st.Store().View(ctx, func(tx store.Tx) error {
		from = ""
		s, err := tx.Session(a.Session)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		prior = s
		if s.Host == sl.st.Host() || !s.State.HoldsSlot() {
			return nil
		}
		if !role.Failover {
			return errSkip
		}
		h, err := tx.Host(s.Host)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err == nil && !sl.fenced(role) && hosts.Status(h, time.Now(), sl.hostTimeout()) == hosts.Up {
			return errSkip
		}
		from = s.Host
		return nil
	})
	if errors.Is(err, errSkip) {
		return nil
	}
	if err != nil {
		return err
	}
	if from == "" {
		return sl.launch(ctx, req)
	}
	// Take the slot over only if nothing changed since it was judged.
	req.Check = func(s *herd.Session, exists bool) error {
		if !exists || s.Host != prior.Host || s.Incarnation != prior.Incarnation {
			return errSkip
		}
		return nil
	}
	req.Reason = herd.ReasonMoved
	req.Data = map[string]any{"from_host": from}
	sl.o.Log.Info("failover: taking over a slot of a stale host", "session", a.Session, "from", from)
	return sl.launch(ctx, req)
}

// endMoved ends, through the stop path's takedown, this host's copies of
// sessions that run on another host now (failover moved their slot while
// this daemon was away): identity-checked as every stop, then the
// incarnation is ended with reason moved and one stopped event. The
// session's record, now the other host's, is left alone.
func (sl *Slots) endMoved(ctx context.Context, moved []herd.Incarnation) {
	for _, inc := range moved {
		if err := sl.endMovedOne(ctx, inc); err != nil && ctx.Err() == nil && !errors.Is(err, errShuttingDown) {
			sl.o.Log.Error("end a moved session's copy", "session", inc.Session, "incarnation", inc.ID, "err", err)
		}
	}
}

func (sl *Slots) endMovedOne(ctx context.Context, inc herd.Incarnation) error {
	if !sl.ops.Begin() {
		return errShuttingDown
	}
	defer sl.ops.End()
	ctx, cancel := sl.KillContext(ctx)
	defer cancel()
	sl.st.BeginTakedown(inc.ID, "")
	defer sl.st.EndTakedown(inc.ID, "")
	if err := sl.terminate(ctx, inc); err != nil {
		return err
	}
	sl.o.Prober.Unwatch(inc.ID)
	return sl.st.Moved(ctx, inc)
}
