package store

import (
	"context"
	"fmt"
	"time"
)

// Retention bounds the event log. Zero fields keep everything.
type Retention struct {
	MaxAge  time.Duration // events older than this are deleted; 0 keeps all
	MaxRows int           // events beyond the newest MaxRows are deleted; 0 keeps all
}

// DefaultRetentionBatch is how many events one PruneEvents call deletes at
// most: small enough that the write lock is held for milliseconds.
const DefaultRetentionBatch = 500

// PruneEvents deletes, in one write transaction, at most batch events that
// r does not keep: first those older than now-MaxAge, then those beyond the
// newest MaxRows, then the ended incarnations no kept event names (ended
// before the oldest event left, and before now-MaxAge). It returns how many it deleted; a caller repeats it (with
// a pause, so other writers get the lock) while it returns batch.
func PruneEvents(ctx context.Context, s Store, r Retention, now time.Time, batch int) (int, error) {
	if batch <= 0 {
		return 0, fmt.Errorf("store: prune events: batch %d, want > 0", batch)
	}
	if r.MaxAge < 0 || r.MaxRows < 0 {
		return 0, fmt.Errorf("store: prune events: negative retention %+v", r)
	}
	if r.MaxAge == 0 && r.MaxRows == 0 {
		return 0, nil
	}
	deleted := 0
	err := s.Update(ctx, func(tx Tx) error {
		deleted = 0
		if r.MaxAge > 0 {
			n, err := tx.DeleteEventsBefore(now.Add(-r.MaxAge), batch)
			if err != nil {
				return err
			}
			deleted += n
		}
		if r.MaxRows > 0 && deleted < batch {
			n, err := tx.DeleteEventsBeyond(r.MaxRows, batch-deleted)
			if err != nil {
				return err
			}
			deleted += n
		}
		if deleted < batch {
			// Incarnations no kept event names any more go with their
			// events: a crash-looping session adds one per crash.
			cut := now
			if r.MaxAge > 0 {
				cut = now.Add(-r.MaxAge)
			}
			n, err := tx.DeleteIncarnationsEndedBefore(cut, batch-deleted)
			if err != nil {
				return err
			}
			deleted += n
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: prune events: %w", err)
	}
	return deleted, nil
}
