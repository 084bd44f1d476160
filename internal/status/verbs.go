package status

import (
	"context"
	"fmt"
	"time"

	"herd"
	"herd/internal/store"
)

// Archived marks a session done (the reaper stops it once detached); a
// session archived already is left as it is.
func (m *Manager) Archived(ctx context.Context, name string) error {
	var s herd.Session
	wrote := false
	err := m.st.Update(ctx, func(tx store.Tx) error {
		wrote = false
		var err error
		if s, err = tx.Session(name); err != nil {
			return err
		}
		if s.Archived {
			return nil
		}
		s.Archived = true
		if err := tx.PutSession(s); err != nil {
			return err
		}
		wrote = true
		return tx.AppendEvent(m.Event(s, s.Incarnation, herd.EventActivity, herd.ReasonArchived, "archived by user; the reaper stops it once detached", nil))
	})
	if err == nil && wrote {
		m.publish(Change{Session: name, Incarnation: s.Incarnation, What: ChangeState, State: s.State, Activity: s.Activity})
	}
	return err
}

// Reset clears a session's crash count: the next crash backs off from the
// initial delay again. A failed session is re-armed (it relaunches now).
// The caller holds the session's lock (Lock).
func (m *Manager) Reset(ctx context.Context, name string) (rearmed bool, err error) {
	var s herd.Session
	err = m.st.Update(ctx, func(tx store.Tx) error {
		var err error
		if s, err = tx.Session(name); err != nil {
			return err
		}
		now := time.Now().UTC()
		prior := s.Restarts
		s.Restarts, s.LastCrashAt = 0, nil
		rearmed = s.State == herd.StateFailed
		if rearmed {
			s.State, s.BackoffUntil, s.StateSince = herd.StateBackoff, &now, now
		}
		if s.State == herd.StateBackoff {
			s.BackoffUntil = &now // the backoff belonged to the old count
		}
		if err := tx.PutSession(s); err != nil {
			return err
		}
		msg := fmt.Sprintf("crash count reset by user (was %d)", prior)
		return tx.AppendEvent(m.Event(s, s.Incarnation, herd.EventActivity, herd.ReasonUser, msg,
			map[string]any{"reset": true, "restarts_before": prior, "rearmed": rearmed}))
	})
	if err == nil {
		m.publish(Change{Session: name, Incarnation: s.Incarnation, What: ChangeState | ChangeRole, State: s.State, Activity: s.Activity})
	}
	return rearmed, err
}

// Rearm re-arms the failed sessions of roles inside a transaction that
// writes roles (see WriteRoles).
type Rearm func(role string) error

// WriteRoles runs fn, which writes roles (apply, scale), in one write
// transaction; the rearm it is given re-arms a role's failed sessions of
// this host after a person acted: their streak starts over and they
// relaunch now. The sessions re-armed are published once it committed.
func (m *Manager) WriteRoles(ctx context.Context, fn func(tx store.Tx, rearm Rearm) error) error {
	var changes []Change
	err := m.st.Update(ctx, func(tx store.Tx) error {
		changes = changes[:0] // the function may run again (a serialization retry)
		return fn(tx, func(role string) error {
			cs, err := m.rearmTx(tx, role)
			changes = append(changes, cs...)
			return err
		})
	})
	if err == nil {
		m.publish(changes...)
	}
	return err
}

// rearmTx re-arms role's failed sessions of this host inside tx.
func (m *Manager) rearmTx(tx store.Tx, role string) ([]Change, error) {
	sessions, err := tx.SessionsOnHost(m.host)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	var out []Change
	for _, s := range sessions {
		if s.Role != role || s.Host != m.host || s.State != herd.StateFailed {
			continue
		}
		s.State = herd.StateBackoff
		s.Restarts = 0
		s.BackoffUntil = &now
		s.StateSince = now
		if err := tx.PutSession(s); err != nil {
			return nil, err
		}
		out = append(out, Change{Session: s.Name, Incarnation: s.Incarnation, What: ChangeState | ChangeRole, State: s.State, Activity: s.Activity})
	}
	return out, nil
}

// RoleDeleted forgets a role whose sessions are all stopped: the role and
// its sessions' rows go, with events (the worktrees' fate) appended; a
// session of it live again refuses it.
func (m *Manager) RoleDeleted(ctx context.Context, role string, events []*herd.Event) error {
	var removed []Change
	err := m.st.Update(ctx, func(tx store.Tx) error {
		removed = removed[:0] // the function may run again (a serialization retry)
		all, err := tx.Sessions()
		if err != nil {
			return err
		}
		for _, s := range all {
			if s.Role != role {
				continue
			}
			if s.State.Live() {
				return fmt.Errorf("delete role %s: session %s is %s again; retry", role, s.Name, s.State)
			}
			removed = append(removed, Change{Session: s.Name, Incarnation: s.Incarnation, What: ChangeRemoved | ChangeRole, State: s.State, Activity: s.Activity})
		}
		for _, e := range events {
			if err := tx.AppendEvent(e); err != nil {
				return err
			}
		}
		return tx.DeleteRole(role) // and its sessions' rows
	})
	if err == nil {
		m.publish(removed...)
	}
	return err
}
