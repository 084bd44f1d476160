package daemon

import (
	"context"
	"time"

	"herd"
	"herd/internal/hosts"
	"herd/internal/slots"
	"herd/internal/store"
)

// newHeartbeat returns the component that keeps this host's row current,
// beating three times per fleet.host_timeout, and renewing the lease (four
// times per fleet.lease when that is sooner) in a fleet. It writes through
// the writer's store (a write around it would cost the live set a read at
// every beat); a renewal counts only when that store reports a commit the
// database made: a write path that holds writes back while the database is
// away must fail a renewal, never report it done.
func (d *Daemon) newHeartbeat(version string) (*hosts.Heartbeat, error) {
	h := herd.Host{Name: d.host, BootID: d.bootID, Version: version}
	hb, err := hosts.NewHeartbeat(d.status.Store(), h, d.beatEvery(), d.log)
	if err == nil && d.lease != nil {
		hb.Renews(d.lease)
	}
	return hb, err
}

// beatEvery is the heartbeat's period.
func (d *Daemon) beatEvery() time.Duration {
	if d.lease == nil {
		return hosts.Interval(d.cfg.Fleet.HostTimeout)
	}
	return hosts.RenewEvery(d.cfg.Fleet.HostTimeout, d.lease.Duration())
}

// slotsLease is the lease slots fences launches with (nil without one).
func (d *Daemon) slotsLease() slots.Lease {
	if d.lease == nil {
		return nil
	}
	return d.lease
}

// runFence watches the lease until ctx is done. While it is not held (no
// renewal committed for fleet.lease: the store out of reach) the agents of
// failover roles are stopped, with reason fenced, again each round (a
// launch under way when the lease went may start one more); other agents
// are supervised as ever. Once it is held again, the fenced stops the
// store could not take are recorded, and the reconciler runs at once. A
// daemon just started waits for its first renewal's outcome: a lease not
// renewed yet is not a lease lost.
func (d *Daemon) runFence(ctx context.Context) {
	if d.lease == nil {
		return
	}
	every := min(max(d.lease.Duration()/20, 50*time.Millisecond), time.Second)
	grace := hosts.FenceGrace(d.lease.Duration(), d.stopGrace)
	fenced := false
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !d.lease.Tried() {
			continue
		}
		if !d.lease.Held(time.Now()) {
			if !fenced {
				d.log.Warn("lease lost: stopping the agents of failover roles", "host", d.host, "lease", d.lease.Duration())
				fenced = true
			}
			if n := d.slots.Fence(ctx, grace); n > 0 {
				d.log.Warn("fenced", "agents", n)
			}
			continue
		}
		if fenced {
			// The fleet went on while this host was away (slots moved,
			// sessions stopped elsewhere): read it all again.
			d.log.Info("lease held again", "host", d.host)
			fenced = false
			d.status.Invalidate()
			d.slots.Kick()
		}
		if d.slots.FencedPending() > 0 {
			d.slots.RecordFenced(ctx)
		}
	}
}

// runHeartbeat runs the heartbeat until ctx is done. A first write that
// fails (the store unreachable at start) is retried every interval: the
// daemon keeps supervising its own host meanwhile, and other hosts see it
// stale until a beat is recorded.
func (d *Daemon) runHeartbeat(ctx context.Context) {
	every := d.beatEvery()
	for {
		err := d.heartbeat.Run(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		d.log.Warn("heartbeat: host not recorded; retrying", "host", d.host, "err", err, "in", every)
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// listen turns the store's notifications (PostgreSQL LISTEN/NOTIFY) into
// wake-ups: a command for this host runs at once (and the live set status
// keeps is read again), a role written makes the placement leader assign
// at once and a placement put makes every daemon reconcile at once, and
// `events -f` readers read at once. A hint only: the loops poll anyway, so a lost notification
// or a broken listening connection delays things, never loses them. A
// store that cannot notify (SQLite) leaves nothing to do.
func (d *Daemon) listen(ctx context.Context, st store.Store) {
	l, ok := st.(store.Listener)
	if !ok {
		return
	}
	const retry = 5 * time.Second
	for {
		err := l.Listen(ctx, func(channel, payload string) {
			switch channel {
			case store.ChannelCommands:
				if payload == d.host {
					d.status.Invalidate()
					d.commands.Kick()
				}
			case store.ChannelEvents:
				d.server.WakeEvents()
			case store.ChannelPlacements:
				if payload == "" {
					// A role was written: the leader (if this
					// daemon leads) assigns its slots now.
					d.placement.Kick()
					return
				}
				// A slot was placed (here, or moved away):
				// reconcile now, not at the next round.
				d.slots.Kick()
			}
		})
		if ctx.Err() != nil {
			return
		}
		d.log.Warn("store notifications lost; polling alone until they are back", "err", err, "retry_in", retry)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}
