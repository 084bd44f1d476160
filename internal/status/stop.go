package status

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"herd"
	"herd/internal/store"
)

// ErrAlreadyStopped means another caller stopped the session first.
var ErrAlreadyStopped = errors.New("already stopped")

// Stop is the record of one stop (user stop, scale-down, role deletion,
// reaper, reboot sweep), once its processes are down.
type Stop struct {
	// Name is the session; Incarnation the one the stopper read (the
	// compare-and-set: a session relaunched or stopped meanwhile is not
	// stopped again).
	Name, Incarnation string
	// Reason is the exit reason; Kind the event (stopped or reaped).
	Reason, Kind string
	// Message and Data describe the event ("" message: kind and reason).
	Message string
	Data    map[string]any
	// DropReplica lowers the role's replica count by one (user stop).
	DropReplica bool
	// Ran: the stop found a process of the incarnation running. For a
	// launch whose start was never recorded (written ahead, the daemon
	// gone before its process was), that process is adopted on the
	// record before the stop ends it: never_started says no process of
	// an incarnation ever ran, and this one did.
	Ran bool
}

// Stopped ends a session's incarnation on purpose, in one transaction:
// the incarnation ends with its summary, the session becomes stopped with
// a resume snapshot, and exactly one stopped (or reaped) event is
// appended; a session stopped or relaunched meanwhile gives
// ErrAlreadyStopped and no second event. The caller holds the session's
// lock (Lock).
func (m *Manager) Stopped(ctx context.Context, st Stop) error {
	var seen map[string]any
	if st.Incarnation != "" {
		seen = m.Seen(st.Incarnation) // file reads stay out of the write transaction
	}
	ended := false
	var cur herd.Session
	err := m.st.Update(ctx, func(tx store.Tx) error {
		ended = false
		var err error
		cur, err = tx.Session(st.Name)
		if err != nil {
			return err
		}
		if cur.State == herd.StateStopped || cur.Incarnation != st.Incarnation {
			return ErrAlreadyStopped // compare-and-set lost: no second event
		}
		now := time.Now().UTC()
		exit := herd.Exit{Reason: st.Reason, At: now}
		snap := herd.Snapshot{RuntimeKind: cur.RuntimeKind}
		role, rerr := tx.Role(cur.Role)
		if rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
			return rerr
		}
		if rerr == nil {
			snap.Argv, snap.Workdir, snap.Agent = role.Command, role.Workdir, role.Agent
			snap.EnvNames = envNames(role.Env)
		}
		if cur.Incarnation != "" {
			inc, err := tx.Incarnation(cur.Incarnation)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return err
			default:
				snap.Argv, snap.Workdir, snap.RuntimeKind = inc.Argv, inc.Workdir, inc.RuntimeKind
				if inc.EndedAt == nil {
					takeSeenSessionID(&inc, seen)
				}
				snap.AgentSessionID = inc.AgentSessionID
				if inc.EndedAt == nil {
					found := st.Ran && inc.Root.PID == 0
					if found {
						if err := tx.AppendEvent(m.Event(cur, inc.ID, herd.EventAdopted, "", "an unfinished launch's process, found by its marker at its stop", nil)); err != nil {
							return err
						}
					}
					inc.EndedAt, inc.Exit = &now, &exit
					if err := tx.PutIncarnation(inc); err != nil {
						return err
					}
					if err := tx.AppendEvent(m.summaryEvent(cur, inc, seen, now, found)); err != nil {
						return err
					}
					ended = true
				}
			}
		}
		cur.State = herd.StateStopped
		cur.StateSince = now
		cur.Snapshot = &snap
		cur.BackoffUntil = nil
		cur.Runtime, cur.Process = herd.Dead, herd.Dead
		cur.Activity = herd.ActivityUnknown
		cur.Exit = &exit
		if err := tx.PutSession(cur); err != nil {
			return err
		}
		if st.DropReplica && rerr == nil && role.Replicas > 0 {
			role.Replicas--
			role.UpdatedAt = now
			if err := tx.PutRole(role); err != nil {
				return err
			}
		}
		data := map[string]any{"snapshot": snap}
		for k, v := range st.Data {
			data[k] = v
		}
		msg := st.Message
		if msg == "" {
			msg = fmt.Sprintf("%s (%s)", st.Kind, st.Reason)
		}
		return tx.AppendEvent(m.Event(cur, st.Incarnation, st.Kind, st.Reason, msg, data))
	})
	if err == nil {
		w := ChangeState
		if ended {
			w |= ChangeEnded
		}
		if st.DropReplica {
			w |= ChangeRole
		}
		m.publish(Change{Session: st.Name, Incarnation: st.Incarnation, What: w, State: cur.State, Activity: cur.Activity})
	}
	return err
}

// Moved ends an incarnation of this host whose slot was placed on another
// host (its processes are down): the session is the other host's now and
// is left as it is. The caller took the processes down under a takedown.
func (m *Manager) Moved(ctx context.Context, inc herd.Incarnation) error {
	ended := false
	var s herd.Session
	err := m.st.Update(ctx, func(tx store.Tx) error {
		ended = false
		cur, err := tx.Incarnation(inc.ID)
		if err != nil || cur.EndedAt != nil {
			return err
		}
		if s, err = tx.Session(inc.Session); err != nil {
			return err
		}
		now := time.Now().UTC()
		cur.EndedAt, cur.Exit = &now, &herd.Exit{Reason: herd.ReasonMoved, At: now}
		if err := tx.PutIncarnation(cur); err != nil {
			return err
		}
		ended = true
		msg := fmt.Sprintf("stopped (moved): the slot runs on host %s now", s.Host)
		return tx.AppendEvent(m.Event(s, inc.ID, herd.EventStopped, herd.ReasonMoved, msg, map[string]any{"to_host": s.Host}))
	})
	if err == nil && ended {
		m.publish(Change{Session: inc.Session, Incarnation: inc.ID, What: ChangeEnded, State: s.State, Activity: s.Activity})
	}
	return err
}

// envNames lists the names (not values) of a role's environment, for snapshots.
func envNames(env map[string]string) []string {
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
