package slots

import (
	"context"
	"errors"

	"herd"
	"herd/internal/loop"
	"herd/internal/reconcile"
)

// maxParallelLaunches bounds the launches of one reconcile round that run
// at once. Most of a launch is waiting (the runtime starting the process,
// the pane's process exec'ing, the store's commit), so a few side by side
// keep the runtime and the store busy; more would only queue on them.
const maxParallelLaunches = 8

// launchWave runs the launch steps of one plan, at most
// maxParallelLaunches at a time, in plan order, and returns once all are
// done: the caller's next wake-up (a backoff's end) stays right, and a
// round never overlaps the next. Each launch holds its own slot's lock, so
// one slot never has two launches, and each keeps the write-ahead rule: a
// launch cut short by a shutdown leaves its record for the next daemon.
// gens are the generations of this host's placements, by role and index.
func (sl *Slots) launchWave(ctx context.Context, roles map[string]herd.Role, steps []reconcile.Action, gens map[string]map[int]int64) {
	loop.Each(maxParallelLaunches, steps, func(a reconcile.Action) {
		defer func() {
			if r := recover(); r != nil {
				loop.Recovered(sl.o.Log, "launch "+a.Session, r)
			}
		}()
		if ctx.Err() != nil {
			return
		}
		var err error
		if roles[a.Role].Placed() {
			err = sl.launchPlaced(ctx, roles[a.Role], a, gens[a.Role][a.Index])
		} else {
			err = sl.launch(ctx, reconcileLaunch(roles[a.Role], a))
		}
		if err != nil && ctx.Err() == nil && !errors.Is(err, errShuttingDown) {
			sl.o.Log.Error("reconcile", "action", a.Kind, "session", a.Session, "err", err)
		}
	})
}
