package daemon

import (
	"context"
	"time"

	"herd"
	"herd/internal/hosts"
)

// newHeartbeat returns the component that keeps this host's row current,
// beating three times per fleet.host_timeout.
func (d *Daemon) newHeartbeat(version string) (*hosts.Heartbeat, error) {
	h := herd.Host{Name: d.host, BootID: d.bootID, Version: version}
	return hosts.NewHeartbeat(d.status.Store(), h, hosts.Interval(d.cfg.Fleet.HostTimeout), d.log)
}

// runHeartbeat runs the heartbeat until ctx is done. A first write that
// fails (the store unreachable at start) is retried every interval: the
// daemon keeps supervising its own host meanwhile, and other hosts see it
// stale until a beat is recorded.
func (d *Daemon) runHeartbeat(ctx context.Context) {
	every := hosts.Interval(d.cfg.Fleet.HostTimeout)
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
