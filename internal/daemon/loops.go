package daemon

import (
	"context"
	"errors"
	"sync"
	"time"

	"herd"
	"herd/internal/reconcile"
	"herd/internal/store"
)

// reconcileLoop brings sessions toward the declared roles every probe
// interval, at once when kicked, and exactly when a backoff expires.
func (d *Daemon) reconcileLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-d.kick:
		}
		next := d.reconcileOnce(ctx)
		wait := d.cfg.Probe.Interval
		if !next.IsZero() {
			if until := time.Until(next); until < wait {
				wait = max(until, time.Millisecond)
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
	}
}

// reconcileOnce runs one plan; it returns the earliest pending backoff
// deadline (zero when none), so the loop wakes exactly then.
func (d *Daemon) reconcileOnce(ctx context.Context) (next time.Time) {
	roles, sessions, err := d.snapshot(ctx)
	if err != nil {
		d.log.Error("reconcile: read store", "err", err)
		return time.Time{}
	}
	byName := make(map[string]herd.Role, len(roles))
	for _, r := range roles {
		byName[r.Name] = r
	}
	now := time.Now()
	// The next wake-up is taken against the plan's own clock: a backoff that
	// falls due while this round's launches run must not wait for a tick.
	for _, s := range sessions {
		if s.State == herd.StateBackoff && s.BackoffUntil != nil && s.BackoffUntil.After(now) {
			if next.IsZero() || s.BackoffUntil.Before(next) {
				next = *s.BackoffUntil
			}
		}
	}
	for _, a := range reconcile.Plan(roles, sessions, now) {
		if ctx.Err() != nil {
			return time.Time{}
		}
		if a.Kind == reconcile.Stop {
			d.stopInBackground(ctx, a)
			continue
		}
		if err := d.launch(ctx, d.reconcileLaunch(byName[a.Role], a)); err != nil {
			d.log.Error("reconcile", "action", a.Kind, "session", a.Session, "err", err)
		}
	}
	return next
}

// stopInBackground runs a planned stop on its own goroutine: a stop may
// wait out the grace period of an agent that ignores SIGTERM, and neither
// the other stops of a scale-down nor the launches of other roles wait for
// it. A session whose stop is already under way is skipped.
func (d *Daemon) stopInBackground(ctx context.Context, a reconcile.Action) {
	release, underWay := d.claimStop(a.Session)
	if underWay != nil {
		return
	}
	go func() {
		defer release()
		err := d.slottedStop(ctx, stopRequest{Name: a.Session, Reason: a.Reason})
		if err != nil && !errors.Is(err, errAlreadyStopped) && !errors.Is(err, errShuttingDown) {
			d.log.Error("reconcile", "action", a.Kind, "session", a.Session, "err", err)
		}
	}()
}

// maxParallelStops bounds the stops that run at once: each may wait out a
// grace period, and each ends with a tmux listing and a store write.
const maxParallelStops = 32

// claimStop marks the bounded stop of session name as under way; release
// ends the claim. When one is under way already, underWay is closed at its
// end and release is nil.
func (d *Daemon) claimStop(name string) (release func(), underWay <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if done, ok := d.stopsUnderWay[name]; ok {
		return nil, done
	}
	done := make(chan struct{})
	d.stopsUnderWay[name] = done
	return func() {
		d.mu.Lock()
		delete(d.stopsUnderWay, name)
		d.mu.Unlock()
		close(done)
	}, nil
}

// boundedStop is stop, run once one of the stop slots is free, and once
// per session at a time: a caller that finds a stop of the same session
// under way (a role deletion meeting the reconciler's scale-down) waits
// for it instead of taking a second slot.
func (d *Daemon) boundedStop(ctx context.Context, req stopRequest) error {
	release, underWay := d.claimStop(req.Name)
	if underWay != nil {
		<-underWay
		return errAlreadyStopped
	}
	defer release()
	return d.slottedStop(ctx, req)
}

// slottedStop is stop once a stop slot is free. The wait has no deadline
// of its own: each stop holding a slot ends within its grace.
func (d *Daemon) slottedStop(ctx context.Context, req stopRequest) error {
	d.stopSlots <- struct{}{}
	defer func() { <-d.stopSlots }()
	return d.stop(ctx, req)
}

// stopAll stops the sessions of reqs at once, each through the one stop
// path; errs[i] is the outcome of reqs[i].
func (d *Daemon) stopAll(ctx context.Context, reqs []stopRequest) (errs []error) {
	errs = make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { errs[i] = d.boundedStop(ctx, req) })
	}
	wg.Wait()
	return errs
}

// resetFailedTx re-arms a role's failed sessions after a person acted
// (apply, scale): their streak starts over and they relaunch now.
func (d *Daemon) resetFailedTx(tx store.Tx, role string) error {
	sessions, err := tx.Sessions()
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	for _, s := range sessions {
		if s.Role != role || s.Host != d.host || s.State != herd.StateFailed {
			continue
		}
		s.State = herd.StateBackoff
		s.Restarts = 0
		s.BackoffUntil = &now
		s.StateSince = now
		if err := tx.PutSession(s); err != nil {
			return err
		}
	}
	return nil
}
