package daemon

import (
	"time"

	"herd/internal/placement"
	"herd/internal/store"
)

// leaseLength is fleet.lease in a fleet, zero without a lease.
func (d *Daemon) leaseLength() time.Duration {
	if d.lease == nil {
		return 0
	}
	return d.lease.Duration()
}

// newPlacement returns the placement leader election of this daemon: the
// leader assigns the slots of placed roles every probe interval, and its
// own reconciler runs at once after a change (the others are told by the
// store's notification, see listen, else read it on their next round).
func (d *Daemon) newPlacement(backend store.Store) *placement.Leader {
	// The manager's store writes through to the live set; the backend
	// behind it counts the writes.
	wc, _ := backend.(store.WriteCounter)
	return placement.NewLeader(placement.Options{
		Store: d.status.Store(), Host: d.host, HostTimeout: d.cfg.Fleet.HostTimeout, Lease: d.leaseLength(),
		Interval: d.cfg.Probe.Interval, Changed: d.slots.Kick, Log: d.log, Writes: wc,
	})
}
