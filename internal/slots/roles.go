package slots

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herd"
	"herd/internal/config"
	"herd/internal/status"
	"herd/internal/store"
)

// BadInput is an error in what a caller asked for (an invalid role, a
// replica count out of range).
type BadInput struct{ Msg string }

func (e *BadInput) Error() string { return e.Msg }

// Badf formats a BadInput.
func Badf(format string, a ...any) error { return &BadInput{fmt.Sprintf(format, a...)} }

// ApplyRoles validates every role, then upserts them all in one
// transaction (see Apply).
func (sl *Slots) ApplyRoles(ctx context.Context, roles []herd.Role) error {
	_, err := sl.Apply(ctx, roles, ApplyOptions{})
	return err
}

// Scale sets a role's desired replicas; its failed sessions re-arm.
func (sl *Slots) Scale(ctx context.Context, name string, replicas int) error {
	if replicas < 0 {
		return Badf("scale: replicas must be a number >= 0")
	}
	if replicas > config.MaxReplicas {
		return Badf("scale: replicas = %d: at most %d per role", replicas, config.MaxReplicas)
	}
	err := sl.st.WriteRoles(ctx, func(tx store.Tx, rearm status.Rearm) error {
		ro, err := tx.Role(name)
		if err != nil {
			return named("role", name, err)
		}
		ro.Replicas = replicas
		ro.UpdatedAt = time.Now().UTC()
		if err := tx.PutRole(ro); err != nil {
			return err
		}
		return rearm(name)
	})
	if err == nil {
		sl.Kick()
	}
	return err
}

// DeleteRole scales the role to zero (so nothing relaunches), stops every
// session through the stop path, then forgets the role, its sessions and
// their crash history. A session that cannot be stopped (its identity
// unverifiable) keeps the role: nothing is forgotten while it may live. It
// returns how many sessions it stopped.
func (sl *Slots) DeleteRole(ctx context.Context, name string) (int, error) {
	var sessions []herd.Session
	var role herd.Role
	err := sl.st.Store().Update(ctx, func(tx store.Tx) error {
		sessions = nil // the function may run again (a serialization retry)
		ro, err := tx.Role(name)
		if err != nil {
			return named("role", name, err)
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
	var reqs []StopRequest
	elsewhere := false
	for _, s := range sessions {
		if s.State == herd.StateStopped {
			continue
		}
		if s.Host != sl.st.Host() {
			if role.Placed() {
				elsewhere = true // scaled to 0 above: its host stops it
				continue
			}
			return 0, fmt.Errorf("delete role %s: session %s runs on host %s; delete it there", name, s.Name, s.Host)
		}
		reqs = append(reqs, StopRequest{Name: s.Name, Reason: herd.ReasonRoleDeleted})
	}
	var failed []error
	for i, err := range sl.stopAll(ctx, reqs) {
		if err != nil && !errors.Is(err, ErrAlreadyStopped) {
			failed = append(failed, fmt.Errorf("stop %s: %w", reqs[i].Name, err))
		}
	}
	if len(failed) > 0 {
		return 0, fmt.Errorf("delete role %s: %w (the role is kept, scaled to 0)", name, errors.Join(failed...))
	}
	if elsewhere {
		if err := sl.awaitStoppedElsewhere(ctx, name); err != nil {
			return 0, fmt.Errorf("delete role %s: %w (the role is kept, scaled to 0)", name, err)
		}
	}
	events := sl.removeWorktrees(ctx, role, sessions)
	err = sl.st.RoleDeleted(ctx, name, events)
	return len(reqs), err
}

// removeWorktrees removes the worktrees of a deleted worktree role's
// sessions that lose nothing (clean, and their branch merged or without
// commits of its own) and keeps the others; it returns one event per
// worktree saying which, and why and where for a kept one.
func (sl *Slots) removeWorktrees(ctx context.Context, role herd.Role, sessions []herd.Session) []*herd.Event {
	if !role.Worktree {
		return nil
	}
	var events []*herd.Event
	for _, s := range sessions {
		r, err := sl.o.Worktrees.Remove(ctx, worktreeOptions(role, s.Name))
		switch {
		case err != nil:
			events = append(events, sl.st.Event(s, s.Incarnation, herd.EventWorktree, "kept",
				fmt.Sprintf("worktree kept: %v", err), map[string]any{"error": err.Error()}))
		case r.Absent:
		case r.Removed:
			events = append(events, sl.st.Event(s, s.Incarnation, herd.EventWorktree, "removed",
				fmt.Sprintf("worktree %s and branch %s removed", r.Path, r.Branch), map[string]any{"path": r.Path, "branch": r.Branch}))
		default:
			sl.o.Log.Info("worktree kept", "session", s.Name, "path", r.Path, "why", r.Reason)
			events = append(events, sl.st.Event(s, s.Incarnation, herd.EventWorktree, "kept",
				fmt.Sprintf("worktree %s kept: %s (herd worktree prune removes it)", r.Path, r.Reason),
				map[string]any{"path": r.Path, "branch": r.Branch, "why": r.Reason, "workdir": role.Workdir}))
		}
	}
	return events
}

// Archive marks a session done; the reaper stops it once detached.
func (sl *Slots) Archive(ctx context.Context, name string) error {
	if err := sl.st.Archived(ctx, name); err != nil {
		return named("session", name, err)
	}
	return nil
}

// named puts the kind and name of a row in front of err, unless err
// already names it (a store.NotFoundError: "session x not found").
func named(what, name string, err error) error {
	var nf *store.NotFoundError
	if errors.As(err, &nf) {
		return err
	}
	return fmt.Errorf("%s %s: %w", what, name, err)
}

// Named is named for the API's handlers.
func Named(what, name string, err error) error { return named(what, name, err) }
