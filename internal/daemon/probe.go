package daemon

import (
	"context"
	"errors"
	"reflect"
	"time"

	"herd"
	"herd/internal/store"
)

// probeLoop checks every live session each probe interval, and at once
// when a watcher reports an exit. Each runtime's probe runs under the
// tick's deadline, so a hung call cannot delay the next tick.
func (d *Daemon) probeLoop(ctx context.Context) {
	ticker := time.NewTicker(d.cfg.Probe.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-d.probeKick:
		}
		d.probeOnce(ctx)
	}
}

// probeOnce runs one probe round over this host's live sessions.
func (d *Daemon) probeOnce(ctx context.Context) {
	// The tick ends on time: a call still running then (a hung tmux) goes on
	// in the background, bounded by probe.timeout, and its sessions read
	// unknown for this tick.
	tickCtx, cancel := context.WithTimeout(ctx, d.cfg.Probe.Interval)
	defer cancel()
	all, live, err := d.readLive(tickCtx)
	if err != nil {
		d.log.Error("probe: read store", "err", err)
		return
	}
	var tmuxes []liveItem
	for _, it := range live {
		if it.s.RuntimeKind == herd.RuntimeTmux {
			tmuxes = append(tmuxes, it)
		} else {
			d.probeExec(tickCtx, it.s, it.inc)
		}
	}
	d.probeTmux(tickCtx, tmuxes, all)
}

// liveItem is a live session with its open incarnation.
type liveItem struct {
	s   herd.Session
	inc herd.Incarnation
}

// readLive reads this host's sessions and, for the live ones, their open
// incarnation: two queries in one transaction, whatever the number of
// sessions. The prober and the watchdog read through it each tick.
func (d *Daemon) readLive(ctx context.Context) (all []herd.Session, live []liveItem, err error) {
	err = d.st.View(ctx, func(tx store.Tx) error {
		all, live = nil, nil
		sessions, err := tx.Sessions()
		if err != nil {
			return err
		}
		open, err := tx.OpenIncarnations()
		if err != nil {
			return err
		}
		byID := make(map[string]herd.Incarnation, len(open))
		for _, inc := range open {
			byID[inc.ID] = inc
		}
		for _, s := range sessions {
			if s.Host != d.host {
				continue
			}
			all = append(all, s)
			if inc, ok := byID[s.Incarnation]; ok && s.State.Live() {
				live = append(live, liveItem{s: s, inc: inc})
			}
		}
		return nil
	})
	return all, live, err
}

// probeExec checks one exec session's agent through /proc.
func (d *Daemon) probeExec(ctx context.Context, s herd.Session, inc herd.Incarnation) {
	if inc.Identity.Zero() {
		d.findAgent(ctx, s, inc)
		return
	}
	if d.isWatched(inc) {
		return // its watcher reports the death the moment it happens
	}
	switch d.proc.Check(inc.Identity, d.bootID) {
	case herd.Alive:
		d.markAlive(ctx, s, inc, herd.EventAdopted)
	case herd.Dead:
		d.recordDeath(ctx, death{Session: s.Name, Incarnation: inc.ID, Exit: herd.Exit{Reason: herd.ReasonProcessGone}})
	default:
		d.markUnknown(ctx, s, inc.ID, "process identity cannot be read")
	}
}

// findAgent looks for the agent under a wrapper and returns the
// incarnation with its identity when found; the wrapper dying first is a
// death of the incarnation.
func (d *Daemon) findAgent(ctx context.Context, s herd.Session, inc herd.Incarnation) herd.Incarnation {
	role, err := d.role(ctx, s.Role)
	if err != nil {
		return inc
	}
	names, _ := agentNames(role, inc.Argv)
	if len(names) > 0 {
		if pid, ok, _ := d.proc.FindAgent(inc.Root.PID, names); ok && d.proc.Check(inc.Root, d.bootID) == herd.Alive {
			if id, err := d.proc.Identify(pid, d.bootID); err == nil && id.Marker == inc.ID {
				inc.Identity = id
				d.markAlive(ctx, s, inc, "")
				return inc
			}
		}
	}
	// A root that is our child is reaped by its watcher, with its status.
	if !d.watchingPID(inc.ID, inc.Root.PID) && d.proc.Check(inc.Root, d.bootID) == herd.Dead {
		d.recordDeath(ctx, death{Session: s.Name, Incarnation: inc.ID, Exit: herd.Exit{Reason: herd.ReasonProcessGone}})
	}
	return inc
}

// markAlive records that an incarnation's agent is alive and watches it.
// kind is the event to record (adopted, or none).
func (d *Daemon) markAlive(ctx context.Context, s herd.Session, inc herd.Incarnation, kind string) {
	d.update(ctx, s.Name, inc.ID, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		var events []*herd.Event
		stored, err := tx.Incarnation(inc.ID)
		if err != nil {
			return nil, err
		}
		if stored.Identity != inc.Identity {
			stored.Identity = inc.Identity
			if err := tx.PutIncarnation(stored); err != nil {
				return nil, err
			}
		}
		if kind != "" {
			events = append(events, d.event(*cur, inc.ID, kind, "", "identity verified: pid, start time, boot id", map[string]any{"pid": inc.Identity.PID}))
		}
		if cur.State == herd.StatePending || cur.State == herd.StateUnknown {
			if cur.State == herd.StateUnknown {
				events = append(events, d.event(*cur, inc.ID, herd.EventRecovered, "", "process readable again", nil))
			}
			cur.State = herd.StateRunning
			cur.StateSince = time.Now().UTC()
		}
		cur.Process = herd.Alive
		// Under the session's lock and only while inc is current: a stop
		// or death that ended it meanwhile leaves no watcher behind.
		d.watch(s.Name, inc, nil)
		return events, nil
	})
}

// markUnknown records that a session cannot be read; nothing destructive
// follows from it.
func (d *Daemon) markUnknown(ctx context.Context, s herd.Session, inc, why string) {
	d.update(ctx, s.Name, inc, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		if cur.State == herd.StateUnknown {
			return nil, nil
		}
		cur.State = herd.StateUnknown
		cur.StateSince = time.Now().UTC()
		cur.Process = herd.Unknown
		return []*herd.Event{d.event(*cur, inc, herd.EventProbeUnknown, "", why, nil)}, nil
	})
}

// update applies fn to a live session under its lock, only while inc is
// still its current incarnation; events returned are appended.
func (d *Daemon) update(ctx context.Context, name, inc string, fn func(tx store.Tx, s *herd.Session) ([]*herd.Event, error)) error {
	unlock, err := d.locks.LockCtx(ctx, name)
	if err != nil {
		return err // busy (a stop in progress): the next tick looks again
	}
	defer unlock()
	return d.st.Update(ctx, func(tx store.Tx) error {
		s, err := tx.Session(name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.Incarnation != inc || !s.State.Live() {
			return nil
		}
		before := s
		events, err := fn(tx, &s)
		if err != nil {
			return err
		}
		if !sameSession(before, s) {
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		for _, e := range events {
			if err := tx.AppendEvent(e); err != nil {
				return err
			}
		}
		return nil
	})
}

func sameSession(a, b herd.Session) bool { return reflect.DeepEqual(a, b) }

func (d *Daemon) role(ctx context.Context, name string) (r herd.Role, err error) {
	err = d.st.View(ctx, func(tx store.Tx) error {
		r, err = tx.Role(name)
		return err
	})
	return r, err
}

// adopt runs the first probe round synchronously so re-adopted agents are
// verified before the reconciler considers launching anything.
func (d *Daemon) adopt(ctx context.Context) {
	d.probeOnce(ctx)
}
