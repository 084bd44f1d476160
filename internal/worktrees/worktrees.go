// Package worktrees looks after the git worktrees of sessions beyond their
// launch: the status views show, their removal when a role is deleted or a
// session reaped (only when that loses nothing), and the prune of those
// kept. The daemon wires it; the API, the reaper and roles call it. It
// reads the store and appends worktree events, and never makes a worktree
// (the launch does, through internal/worktree) nor touches a live
// session's.
package worktrees

import (
	"context"
	"fmt"
	"log/slog"

	"herd"
	"herd/internal/status"
	"herd/internal/store"
	"herd/internal/worktree"
)

// Options configure Worktrees.
type Options struct {
	Status *status.Manager
	// Manager is the worktree adapter the launches use too (its locks
	// serialize changes per repository).
	Manager *worktree.Manager
	Log     *slog.Logger
}

// Worktrees looks after this host's session worktrees.
type Worktrees struct {
	o  Options
	st *status.Manager
	// cache caches the worktree status views show.
	cache worktree.StatusCache
}

// New returns Worktrees.
func New(o Options) *Worktrees {
	if o.Manager == nil {
		o.Manager = &worktree.Manager{}
	}
	w := &Worktrees{o: o, st: o.Status}
	w.cache.M = o.Manager
	return w
}

// RemoveOf removes the worktrees of a deleted worktree role's sessions
// that lose nothing (clean, and their branch merged or without commits of
// its own) and keeps the others; it returns one event per worktree saying
// which, and why and where for a kept one.
func (w *Worktrees) RemoveOf(ctx context.Context, role herd.Role, sessions []herd.Session) []*herd.Event {
	if !role.Worktree {
		return nil
	}
	var events []*herd.Event
	for _, s := range sessions {
		r, err := w.o.Manager.Remove(ctx, worktree.OptionsFor(role, s.Name))
		switch {
		case err != nil:
			events = append(events, w.st.Event(s, s.Incarnation, herd.EventWorktree, "kept",
				fmt.Sprintf("worktree kept: %v", err), map[string]any{"error": err.Error()}))
		case r.Absent:
		case r.Removed:
			events = append(events, w.st.Event(s, s.Incarnation, herd.EventWorktree, "removed",
				fmt.Sprintf("worktree %s and branch %s removed", r.Path, r.Branch), map[string]any{"path": r.Path, "branch": r.Branch}))
		default:
			w.o.Log.Info("worktree kept", "session", s.Name, "path", r.Path, "why", r.Reason)
			events = append(events, w.st.Event(s, s.Incarnation, herd.EventWorktree, "kept",
				fmt.Sprintf("worktree %s kept: %s (herd worktree prune removes it)", r.Path, r.Reason),
				map[string]any{"path": r.Path, "branch": r.Branch, "why": r.Reason, "workdir": role.Workdir}))
		}
	}
	return events
}

// Remove removes a stopped session's worktree under delete role's rule
// (clean, and its branch merged or without commits of its own; otherwise
// kept, with an event saying why and where): the reaper calls it after a
// reap. A resume makes the worktree again.
func (w *Worktrees) Remove(ctx context.Context, session string) {
	unlock := w.st.Lock(session) // no resume meanwhile
	defer unlock()
	var s herd.Session
	var role herd.Role
	err := w.st.Store().View(ctx, func(tx store.Tx) error {
		var err error
		if s, err = tx.Session(session); err != nil {
			return err
		}
		role, err = tx.Role(s.Role)
		return err
	})
	if err != nil || !role.Worktree || s.State.Live() {
		return
	}
	events := w.RemoveOf(ctx, role, []herd.Session{s})
	if len(events) == 0 {
		return
	}
	err = w.st.Store().Update(ctx, func(tx store.Tx) error {
		for _, e := range events {
			if err := tx.AppendEvent(e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		w.o.Log.Warn("worktree of a reaped session: record", "session", session, "err", err)
	}
}
