package status

import (
	"context"
	"time"

	"herd/internal/loop"
	"herd/internal/store"
)

// retentionEvery is how often the event log is pruned; retentionPause is
// the pause between two full batches, so other writers get the lock.
const (
	retentionEvery = time.Minute
	retentionPause = 50 * time.Millisecond
)

// RunRetention keeps the event log within r until ctx is done: every
// minute (the first time at once) it deletes what r does not keep, in
// small batches with pauses between them.
func (m *Manager) RunRetention(ctx context.Context, r store.Retention) {
	if r.MaxAge == 0 && r.MaxRows == 0 {
		return // keep everything
	}
	loop.Loop{Name: "retention", Log: m.log, Every: retentionEvery}.Run(ctx, func(ctx context.Context) time.Duration {
		total := 0
		for ctx.Err() == nil {
			n, err := store.PruneEvents(ctx, m.st, r, time.Now(), store.DefaultRetentionBatch)
			total += n
			if err != nil {
				if ctx.Err() == nil {
					m.log.Warn("event retention", "err", err)
				}
				break
			}
			if n < store.DefaultRetentionBatch {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(retentionPause):
			}
		}
		if total > 0 {
			m.log.Info("event retention: old events deleted", "deleted", total)
		}
		return 0
	})
}
