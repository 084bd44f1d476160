package daemon

import (
	"context"
	"errors"

	"herd/internal/peer"
	"herd/internal/store"
)

// liveIncarnation is the peer identification's lookup (peer.Finder): the
// incarnation with this id open and current on this host's live set
// (memory), else whether the store has it at all.
func (d *Daemon) liveIncarnation(ctx context.Context, id string) (peer.Record, peer.State, error) {
	_, live, err := d.status.Live(ctx)
	if err != nil {
		return peer.Record{}, peer.Unrecorded, err
	}
	for _, l := range live {
		if l.Inc.ID == id && l.S.Incarnation == id && l.S.State.Live() && l.Inc.EndedAt == nil {
			return peer.Record{Session: l.S.Name, Root: l.Inc.Root, Agent: l.Inc.Identity}, peer.Live, nil
		}
	}
	_, err = d.status.Incarnation(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return peer.Record{}, peer.Unrecorded, nil
	case err != nil:
		return peer.Record{}, peer.Unrecorded, err
	}
	return peer.Record{}, peer.Ended, nil
}
