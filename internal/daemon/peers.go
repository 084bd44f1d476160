package daemon

import (
	"context"

	"herd/internal/peer"
)

// liveIncarnation is the peer identification's lookup (peer.Finder): the
// incarnation with this id that is open and current on this host's live
// set, read from memory.
func (d *Daemon) liveIncarnation(ctx context.Context, id string) (peer.Record, bool, error) {
	_, live, err := d.status.Live(ctx)
	if err != nil {
		return peer.Record{}, false, err
	}
	for _, l := range live {
		if l.Inc.ID == id && l.S.Incarnation == id && l.S.State.Live() && l.Inc.EndedAt == nil {
			return peer.Record{Session: l.S.Name, Root: l.Inc.Root, Agent: l.Inc.Identity}, true, nil
		}
	}
	return peer.Record{}, false, nil
}
