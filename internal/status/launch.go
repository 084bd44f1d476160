package status

import (
	"context"
	"time"

	"herd"
	"herd/internal/store"
)

// Launch is one launch of a slot as the writer records it: written ahead
// of its process (LaunchWritten), then started (Launched) or failed
// (LaunchFailed). The caller holds the slot's lock (Lock) throughout.
type Launch struct {
	// Name, Role and Index name the slot.
	Name  string
	Role  string
	Index int
	// Prior is the slot's session as it stood; nil for a new slot.
	Prior *herd.Session
	// Inc is the new incarnation; the launcher fills its process
	// identities (Root, Identity) before Launched.
	Inc herd.Incarnation
	// Kind, Reason, Message and Data are the start event's (spawned,
	// restarted or resumed).
	Kind, Reason, Message string
	Data                  map[string]any
}

// session is the slot's session for l's incarnation: the prior one (crash
// bookkeeping kept), on this host, with the launch's own fields.
func (m *Manager) launchSession(l *Launch) herd.Session {
	s := herd.Session{Name: l.Name, Role: l.Role, Index: l.Index}
	if l.Prior != nil {
		s = *l.Prior
	}
	s.Host = m.host
	s.RuntimeKind = l.Inc.RuntimeKind
	s.Incarnation = l.Inc.ID
	s.Activity = herd.ActivityUnknown
	s.Archived = false
	s.Snapshot = nil
	s.LastActivityAt = nil
	return s
}

// LaunchWritten records a launch's session and incarnation before its
// process starts: pending, with no process known yet. A daemon killed
// during the launch leaves a record the next one resolves (adopts the
// process carrying its marker, or ends the launch) instead of a second
// agent.
func (m *Manager) LaunchWritten(ctx context.Context, l *Launch) error {
	s := m.launchSession(l)
	now := time.Now().UTC()
	s.State, s.StateSince, s.StartedAt = herd.StatePending, now, &now
	s.Runtime, s.Process = herd.Unknown, herd.Unknown
	s.Exit, s.BackoffUntil = nil, nil
	err := m.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutIncarnation(l.Inc); err != nil {
			return err
		}
		return tx.PutSession(s)
	})
	if err == nil {
		m.publish(Change{Session: s.Name, Incarnation: l.Inc.ID, What: ChangeStarted | ChangeState, State: s.State, Activity: s.Activity})
	}
	return err
}

// LaunchFailed records a launch whose process could not start: a crash of
// its incarnation, through crash accounting, so a bad command backs off
// instead of looping.
func (m *Manager) LaunchFailed(ctx context.Context, l *Launch, msg string) error {
	s := m.launchSession(l)
	s.State = herd.StatePending
	inc := l.Inc
	var state herd.State
	err := m.st.Update(ctx, func(tx store.Tx) error {
		s, inc := s, inc // the function may run again (a serialization retry)
		defer func() { state = s.State }()
		if err := tx.PutSession(s); err != nil {
			return err
		}
		if err := tx.PutIncarnation(inc); err != nil {
			return err
		}
		return m.crashTx(tx, &s, &inc, herd.Exit{Reason: herd.ReasonLaunchFailed, Message: clip(msg, 512)}, msg, nil, time.Now().UTC())
	})
	m.Metrics.Crash(herd.ReasonLaunchFailed)
	if err == nil {
		m.publish(Change{Session: s.Name, Incarnation: inc.ID, What: ChangeStarted | ChangeState | ChangeEnded,
			State: state, Activity: herd.ActivityUnknown})
	}
	return err
}

// Launched records a started launch with its start event: running when
// the agent's identity is known, else pending (the prober confirms it).
// l.Data gets the session's restart count.
func (m *Manager) Launched(ctx context.Context, l *Launch) error {
	s := m.launchSession(l)
	now := time.Now().UTC()
	s.StartedAt = &now
	s.StateSince = now
	s.Runtime = herd.Alive
	s.Exit = nil
	s.BackoffUntil = nil
	if l.Inc.Identity.Zero() {
		s.State, s.Process = herd.StatePending, herd.Unknown
	} else {
		s.State, s.Process = herd.StateRunning, herd.Alive
	}
	if l.Data == nil {
		l.Data = map[string]any{}
	}
	l.Data["restarts"] = s.Restarts
	err := m.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutIncarnation(l.Inc); err != nil {
			return err
		}
		if err := tx.PutSession(s); err != nil {
			return err
		}
		return tx.AppendEvent(m.Event(s, l.Inc.ID, l.Kind, l.Reason, l.Message, l.Data))
	})
	if err == nil {
		m.publish(Change{Session: s.Name, Incarnation: l.Inc.ID, What: ChangeStarted | ChangeState, State: s.State, Activity: s.Activity})
	}
	return err
}

// clip bounds s to n bytes, keeping its end (where an error is).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// Parked records a launch of an exec task role's replica that holds no
// task: nothing runs (its agent's turn is its task's), the session is
// succeeded with reason no_task, its last incarnation kept, and a task
// given to it launches it.
func (m *Manager) Parked(ctx context.Context, l *Launch) error {
	s := herd.Session{Name: l.Name, Role: l.Role, Index: l.Index}
	if l.Prior != nil {
		s = *l.Prior
	}
	now := time.Now().UTC()
	s.Host, s.RuntimeKind = m.host, l.Inc.RuntimeKind
	s.Archived, s.Snapshot, s.LastActivityAt = false, nil, nil
	s.State, s.StateSince = herd.StateSucceeded, now
	s.Runtime, s.Process, s.Activity = herd.Dead, herd.Dead, herd.ActivityUnknown
	s.Exit = &herd.Exit{Reason: herd.ReasonNoTask, At: now, Message: "no task: nothing to run"}
	s.BackoffUntil = nil
	err := m.st.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutSession(s); err != nil {
			return err
		}
		return tx.AppendEvent(m.Event(s, s.Incarnation, herd.EventSucceeded, herd.ReasonNoTask,
			"exec task role: nothing runs until a task is given to this replica", nil))
	})
	if err == nil {
		m.publish(Change{Session: s.Name, What: ChangeState, State: s.State, Activity: s.Activity})
	}
	return err
}
