package daemon

import (
	"context"
	"time"

	"herd"
	"herd/internal/hosts"
	"herd/internal/store"
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

// listen turns the store's notifications (PostgreSQL LISTEN/NOTIFY) into
// wake-ups: a command for this host runs at once (and the live set status
// keeps is read again), and `events -f` readers read at once. A hint only: the loops poll anyway, so a lost notification
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
