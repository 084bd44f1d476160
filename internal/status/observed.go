package status

import (
	"context"
	"fmt"
	"time"

	"herd"
	"herd/internal/store"
)

// The changes below are what observers (the prober, the watchdog) report:
// each applies only while the incarnation named is the session's current
// one and the session is live, under the session's lock, in one
// transaction; each reports whether it applied (inc was current).

// Confirm is the prober's report that an incarnation's agent is alive.
type Confirm struct {
	Session string
	// Inc is the incarnation with the identities found (Root, Identity).
	Inc herd.Incarnation
	// Kind is the event to record (adopted), "" for none; Reason and
	// Message, when set, are its reason and message.
	Kind, Reason, Message string
	// Held, when set, is asked under the session's lock: an incarnation
	// the prober holds already (launched, or adopted by another probe
	// path first) is not adopted again.
	Held func() bool
}

// Confirmed records that an incarnation's agent is alive: its identities,
// the process axis, and pending or unknown becoming running. then runs
// once it committed with the incarnation current, under the session's
// lock (the prober watches the agent there, so that a stop that ends the
// incarnation meanwhile leaves no watcher behind).
func (m *Manager) Confirmed(ctx context.Context, c Confirm, then func()) (bool, error) {
	return m.update(ctx, c.Session, c.Inc.ID, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		var events []*herd.Event
		stored, err := tx.Incarnation(c.Inc.ID)
		if err != nil {
			return nil, err
		}
		if stored.Identity != c.Inc.Identity || stored.Root != c.Inc.Root {
			stored.Identity, stored.Root = c.Inc.Identity, c.Inc.Root
			if err := tx.PutIncarnation(stored); err != nil {
				return nil, err
			}
		}
		if c.Kind != "" && !(c.Kind == herd.EventAdopted && c.Held != nil && c.Held()) {
			msg := c.Message
			if msg == "" {
				msg = "identity verified: pid, start time, boot id"
			}
			events = append(events, m.Event(*cur, c.Inc.ID, c.Kind, c.Reason, msg, map[string]any{"pid": c.Inc.Identity.PID}))
		}
		if cur.State == herd.StatePending || cur.State == herd.StateUnknown {
			if cur.State == herd.StateUnknown {
				events = append(events, m.Event(*cur, c.Inc.ID, herd.EventRecovered, "", "process readable again", nil))
			}
			cur.State = herd.StateRunning
			cur.StateSince = time.Now().UTC()
		}
		cur.Process = herd.Alive
		return events, nil
	}, then)
}

// RootFound records the launched process of an unfinished launch (written
// ahead, its daemon killed before the start was recorded) whose agent is
// not found yet: the incarnation is adopted, and its start is in the log.
func (m *Manager) RootFound(ctx context.Context, session string, inc herd.Incarnation) (bool, error) {
	return m.update(ctx, session, inc.ID, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		stored, err := tx.Incarnation(inc.ID)
		if err != nil {
			return nil, err
		}
		if stored.Root == inc.Root {
			return nil, nil
		}
		var events []*herd.Event
		if stored.Root.PID == 0 {
			events = append(events, m.Event(*cur, inc.ID, herd.EventAdopted, "",
				"launched process found; agent not seen yet", map[string]any{"pid": inc.Root.PID}))
		}
		stored.Root = inc.Root
		return events, tx.PutIncarnation(stored)
	}, nil)
}

// Unknown records that a session cannot be read; nothing destructive
// follows from it.
func (m *Manager) Unknown(ctx context.Context, session, inc, why string) (bool, error) {
	return m.update(ctx, session, inc, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		if cur.State == herd.StateUnknown {
			return nil, nil
		}
		cur.State = herd.StateUnknown
		cur.StateSince = time.Now().UTC()
		cur.Process = herd.Unknown
		return []*herd.Event{m.Event(*cur, inc, herd.EventProbeUnknown, "", why, nil)}, nil
	}, nil)
}

// Reachable returns an unknown session to pending: its pane reads alive
// again and the agent under its wrapper has not been seen yet (Confirmed
// takes it to running once it is).
func (m *Manager) Reachable(ctx context.Context, session, inc string) (bool, error) {
	return m.update(ctx, session, inc, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		if cur.State != herd.StateUnknown {
			return nil, nil
		}
		cur.State = herd.StatePending
		cur.StateSince = time.Now().UTC()
		return []*herd.Event{m.Event(*cur, inc, herd.EventRecovered, "", "tmux pane readable again; agent not seen yet", nil)}, nil
	}, nil)
}

// WhileCurrent runs fn under the session's lock while inc is its current
// incarnation and the session live, and reports whether it ran. It writes
// nothing.
func (m *Manager) WhileCurrent(ctx context.Context, session, inc string, fn func()) (bool, error) {
	return m.update(ctx, session, inc, func(store.Tx, *herd.Session) ([]*herd.Event, error) { return nil, nil }, fn)
}

// Stalled marks a silent running session stalled at at.
func (m *Manager) Stalled(ctx context.Context, session, inc string, at time.Time, msg string, data map[string]any) (bool, error) {
	applied := false
	_, err := m.update(ctx, session, inc, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		applied = false
		if cur.State != herd.StateRunning {
			return nil, nil
		}
		applied = true
		cur.State = herd.StateStalled
		cur.StateSince = at.UTC()
		return []*herd.Event{m.Event(*cur, inc, herd.EventStalled, "", msg, data)}, nil
	}, nil)
	return applied && err == nil, err
}

// StallWarning repeats the stall warning of a session still stalled.
func (m *Manager) StallWarning(ctx context.Context, session, inc, msg string, data map[string]any) (bool, error) {
	applied := false
	_, err := m.update(ctx, session, inc, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		applied = cur.State == herd.StateStalled
		if !applied {
			return nil, nil
		}
		return []*herd.Event{m.Event(*cur, inc, herd.EventStallWarning, "", msg, data)}, nil
	}, nil)
	return applied && err == nil, err
}

// Unstalled returns a stalled session to running at at.
func (m *Manager) Unstalled(ctx context.Context, session, inc string, at time.Time, msg string, data map[string]any) (bool, error) {
	applied := false
	_, err := m.update(ctx, session, inc, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		applied = cur.State == herd.StateStalled
		if !applied {
			return nil, nil
		}
		cur.State = herd.StateRunning
		cur.StateSince = at.UTC()
		return []*herd.Event{m.Event(*cur, inc, herd.EventUnstalled, "", msg, data)}, nil
	}, nil)
	return applied && err == nil, err
}

// Seen is what a watcher saw of a session's activity (a hook, the
// agent's output, its screen).
type Seen struct {
	Session, Incarnation string
	// At, when not zero, moves the last activity time forward to it.
	At time.Time
	// Activity, when set and not the session's, is its new activity,
	// recorded with an activity event: Source is the event's reason and
	// data (hook, output, screen), What and Tool describe what showed
	// it; Reason, when set, replaces the event's reason (blocked: the
	// error's), Data is added to its data.
	Activity   herd.Activity
	Source     string
	What, Tool string
	Reason     string
	Data       map[string]any
	// Yield, when set, is asked under the session's lock: true leaves the
	// activity axis alone (output yields to hooks seen meanwhile).
	Yield func() bool
	// Only, when set, applies the new activity only while the session's
	// is this one: a change decided on what the caller read (an account's
	// rate limit marking its sessions, the mark lifted at the reset)
	// leaves alone what a hook recorded meanwhile.
	Only herd.Activity
	// SessionEnd: the agent ended its own session (an activity event
	// session_end naming AgentSessionID).
	SessionEnd bool
	// AgentSessionID, when set, is recorded on the incarnation when it
	// differs (the caller sets it only when new to it).
	AgentSessionID string
}

// Activity records what a watcher saw of a session's activity.
func (m *Manager) Activity(ctx context.Context, a Seen) (bool, error) {
	return m.update(ctx, a.Session, a.Incarnation, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		var events []*herd.Event
		if !a.At.IsZero() && (cur.LastActivityAt == nil || a.At.After(*cur.LastActivityAt)) {
			t := a.At.UTC()
			cur.LastActivityAt = &t
		}
		if a.Activity != "" && a.Activity != cur.Activity && (a.Only == "" || a.Only == cur.Activity) && (a.Yield == nil || !a.Yield()) {
			ev := activityEvent(m, *cur, a.Incarnation, cur.Activity, a.Activity, a.Source, a.What, a.Tool)
			if a.Reason != "" {
				ev.Reason = a.Reason
			}
			for k, v := range a.Data {
				ev.Data[k] = v
			}
			events = append(events, ev)
			cur.Activity = a.Activity
		}
		if a.SessionEnd {
			events = append(events, m.Event(*cur, a.Incarnation, herd.EventActivity, "session_end",
				"the agent ended its session", map[string]any{"agent_session_id": a.AgentSessionID}))
		}
		if a.AgentSessionID != "" {
			stored, err := tx.Incarnation(a.Incarnation)
			if err != nil {
				return nil, err
			}
			if stored.AgentSessionID != a.AgentSessionID {
				stored.AgentSessionID = a.AgentSessionID
				if err := tx.PutIncarnation(stored); err != nil {
					return nil, err
				}
			}
		}
		return events, nil
	}, nil)
}

// activityEvent records a change of the activity axis.
func activityEvent(m *Manager, s herd.Session, inc string, from, to herd.Activity, source, what, tool string) *herd.Event {
	if from == "" {
		from = herd.ActivityUnknown
	}
	msg := fmt.Sprintf("%s -> %s", from, to)
	if what != "" {
		msg += " (" + what
		if tool != "" {
			msg += " " + tool
		}
		msg += ")"
	}
	data := map[string]any{"from": from, "to": to, "source": source}
	if what != "" {
		data["event"] = what
	}
	if tool != "" {
		data["tool"] = tool
	}
	return m.Event(s, inc, herd.EventActivity, source, msg, data)
}

// Killed records that herd killed an incarnation on purpose (a stall
// kill, memory_max); its death is then recorded through RecordDeath.
func (m *Manager) Killed(ctx context.Context, session, inc, reason, msg string, data map[string]any) (bool, error) {
	return m.note(ctx, session, inc, herd.EventKilled, reason, msg, data)
}

// Outdated records that a running incarnation is outdated (its agent's
// binary was replaced on disk).
func (m *Manager) Outdated(ctx context.Context, session, inc, reason, msg string, data map[string]any) (bool, error) {
	return m.updateAs(ctx, session, inc, ChangeOutdated, func(_ store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		return []*herd.Event{m.Event(*cur, inc, herd.EventOutdated, reason, msg, data)}, nil
	}, nil)
}

// Continued records that a blocked agent was typed a continue after its
// rate limit reset.
func (m *Manager) Continued(ctx context.Context, session, inc, reason, msg string, data map[string]any) (bool, error) {
	return m.note(ctx, session, inc, herd.EventActivity, reason, msg, data)
}

// note appends one event about a current incarnation.
func (m *Manager) note(ctx context.Context, session, inc, kind, reason, msg string, data map[string]any) (bool, error) {
	return m.update(ctx, session, inc, func(_ store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		return []*herd.Event{m.Event(*cur, inc, kind, reason, msg, data)}, nil
	}, nil)
}
