// Package roles changes what the slots should hold: apply (validated
// whole, with what changed per role), scale, delete role, archive, and the
// rollout of outdated sessions. The verbs and the daemon's reload call it.
// It writes roles through the status manager and takes sessions down only
// through the slots' one stop path (the Slots interface below): it never
// launches, signals nor kills anything itself.
package roles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/errs"
	"herd/internal/hosts"
	"herd/internal/slots"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/worktrees"
)

// Slots is what roles asks of the slots that run the sessions.
type Slots interface {
	// Kick asks the reconcile loop to run now (a role changed).
	Kick()
	// BoundedStop is the one stop path, bounded (see slots.BoundedStop).
	BoundedStop(ctx context.Context, req slots.StopRequest) error
	// Restart gives a session a fresh incarnation; it returns its id.
	Restart(ctx context.Context, req slots.RestartRequest) (string, error)
	// BinaryUpdated maps the sessions whose incarnation runs a binary
	// replaced on disk to that incarnation.
	BinaryUpdated() map[string]string
}

var _ Slots = (*slots.Slots)(nil)

// Options configure Roles.
type Options struct {
	Status *status.Manager
	Slots  Slots
	// Worktrees removes the worktrees of a deleted role's sessions.
	Worktrees *worktrees.Worktrees
	// Defaults are the [restart] defaults of roles that leave them zero.
	Defaults herd.RestartPolicy
	// HostTimeout ([fleet] host_timeout): another host's daemon silent
	// this long is stale.
	HostTimeout time.Duration
	Log         *slog.Logger
}

// Roles applies, scales, deletes and rolls out this host's roles.
type Roles struct {
	o  Options
	st *status.Manager
	// defs are the [restart] defaults roles inherit (a reload changes them).
	defs defaults
}

// New returns Roles.
func New(o Options) *Roles {
	r := &Roles{o: o, st: o.Status}
	r.defs.p = o.Defaults
	return r
}

// defaults guards the daemon's [restart] defaults, which a reload changes.
type defaults struct {
	mu sync.Mutex // guards p
	p  herd.RestartPolicy
}

// ApplyRoles validates every role, then upserts them all in one
// transaction (see Apply).
func (r *Roles) ApplyRoles(ctx context.Context, roles []herd.Role) error {
	_, err := r.Apply(ctx, roles, ApplyOptions{})
	return err
}

// Scale sets a role's desired replicas; its failed sessions re-arm.
func (r *Roles) Scale(ctx context.Context, name string, replicas int) error {
	if replicas < 0 {
		return errs.Badf("scale: replicas must be a number >= 0")
	}
	if replicas > config.MaxReplicas {
		return errs.Badf("scale: replicas = %d: at most %d per role", replicas, config.MaxReplicas)
	}
	err := r.st.WriteRoles(ctx, func(tx store.Tx, rearm status.Rearm) error {
		ro, err := tx.Role(name)
		if err != nil {
			return errs.Named("role", name, err)
		}
		ro.Replicas = replicas
		ro.UpdatedAt = time.Now().UTC()
		if err := tx.PutRole(ro); err != nil {
			return err
		}
		return rearm(name)
	})
	if err == nil {
		r.o.Slots.Kick()
	}
	return err
}

// DeleteRole scales the role to zero (so nothing relaunches), stops every
// session through the stop path, then forgets the role, its sessions and
// their crash history. A session that cannot be stopped (its identity
// unverifiable) keeps the role: nothing is forgotten while it may live. It
// returns how many sessions it stopped.
func (r *Roles) DeleteRole(ctx context.Context, name string) (int, error) {
	var sessions []herd.Session
	var role herd.Role
	err := r.st.Store().Update(ctx, func(tx store.Tx) error {
		sessions = nil // the function may run again (a serialization retry)
		ro, err := tx.Role(name)
		if err != nil {
			return errs.Named("role", name, err)
		}
		role = ro
		ro.Replicas = 0
		ro.UpdatedAt = time.Now().UTC()
		if err := tx.PutRole(ro); err != nil {
			return err
		}
		all, err := tx.Sessions()
		for _, s := range all {
			if s.Role == name {
				sessions = append(sessions, s)
			}
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	var reqs []slots.StopRequest
	elsewhere := false
	for _, s := range sessions {
		if s.State == herd.StateStopped {
			continue
		}
		if s.Host != r.st.Host() {
			if role.Placed() {
				elsewhere = true // scaled to 0 above: its host stops it
				continue
			}
			return 0, fmt.Errorf("delete role %s: session %s runs on host %s; delete it there", name, s.Name, s.Host)
		}
		reqs = append(reqs, slots.StopRequest{Name: s.Name, Reason: herd.ReasonRoleDeleted})
	}
	var failed []error
	for i, err := range r.stopAll(ctx, reqs) {
		if err != nil && !errors.Is(err, slots.ErrAlreadyStopped) {
			failed = append(failed, fmt.Errorf("stop %s: %w", reqs[i].Name, err))
		}
	}
	if len(failed) > 0 {
		return 0, fmt.Errorf("delete role %s: %w (the role is kept, scaled to 0)", name, errors.Join(failed...))
	}
	if elsewhere {
		if err := r.awaitStoppedElsewhere(ctx, name); err != nil {
			return 0, fmt.Errorf("delete role %s: %w (the role is kept, scaled to 0)", name, err)
		}
	}
	events := r.o.Worktrees.RemoveOf(ctx, role, sessions)
	err = r.st.RoleDeleted(ctx, name, events)
	return len(reqs), err
}

// Archive marks a session done; the reaper stops it once detached.
func (r *Roles) Archive(ctx context.Context, name string) error {
	if err := r.st.Archived(ctx, name); err != nil {
		return errs.Named("session", name, err)
	}
	return nil
}

// stopAll stops the sessions of reqs at once, each through the one stop
// path; errs[i] is the outcome of reqs[i].
func (r *Roles) stopAll(ctx context.Context, reqs []slots.StopRequest) (errs []error) {
	errs = make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { errs[i] = r.o.Slots.BoundedStop(ctx, req) })
	}
	wg.Wait()
	return errs
}

// hostTimeout is Options.HostTimeout, 30s when unset.
func (r *Roles) hostTimeout() time.Duration {
	if r.o.HostTimeout > 0 {
		return r.o.HostTimeout
	}
	return 30 * time.Second
}

// awaitStopped bounds how long deleting a placed role waits for the other
// hosts' daemons to stop their sessions of it.
const awaitStopped = time.Minute

// awaitStoppedElsewhere waits until no session of role holds a slot on
// another host: a placed role being deleted was scaled to 0, and each
// host's reconciler stops its own sessions. A session on a stale host
// cannot be stopped by anyone: the wait ends at once naming it.
func (r *Roles) awaitStoppedElsewhere(ctx context.Context, role string) error {
	ctx, cancel := context.WithTimeout(ctx, awaitStopped)
	defer cancel()
	for {
		var left []herd.Session
		var stale string
		err := r.st.Store().View(ctx, func(tx store.Tx) error {
			left, stale = nil, ""
			all, err := tx.Sessions()
			if err != nil {
				return err
			}
			for _, s := range all {
				if s.Role != role || s.Host == r.st.Host() || !s.State.HoldsSlot() {
					continue
				}
				left = append(left, s)
				h, err := tx.Host(s.Host)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					return err
				}
				if err != nil || hosts.Status(h, time.Now(), r.hostTimeout()) == hosts.Stale {
					stale = s.Name + " on host " + s.Host
				}
			}
			return nil
		})
		switch {
		case err != nil:
			return err
		case len(left) == 0:
			return nil
		case stale != "":
			return fmt.Errorf("session %s: that host's daemon is stale; start it, or retry once it is back", stale)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("session %s on host %s still %s after %v", left[0].Name, left[0].Host, left[0].State, awaitStopped)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
