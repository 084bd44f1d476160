package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/restart"
	"herd/internal/store"
)

// Death is one observed end of an incarnation, whichever path noticed it:
// a child's exit status, a pidfd, a dead pane, a vanished pane, a stall kill.
type Death struct {
	Session     string
	Incarnation string
	Exit        herd.Exit
	// Message explains the evidence, for the event log.
	Message string
	// Leftover: part of the incarnation may still be up (the agent died
	// in a pane that lives on, under a wrapper): the death is published
	// with ChangeLeftover, and slots takes the rest down.
	Leftover bool
}

// RecordDeath is herd's single crash-accounting entry point. Every
// detection path calls it. It is a compare-and-set on the incarnation: the
// first path to report a death does the bookkeeping, later reports of the
// same death are no-ops, so a death is never counted twice nor skipped.
// It reports whether this call accounted the death.
func (m *Manager) RecordDeath(ctx context.Context, dt Death) (bool, error) {
	if m.takenDown(dt.Incarnation, dt.Exit.Reason) {
		return false, nil // a takedown under way records this death
	}
	unlock, err := m.locks.LockCtx(ctx, dt.Session)
	if err != nil {
		return false, err
	}
	defer unlock()
	// What the watchdog saw is gathered before the write transaction: it
	// reads the last output from files.
	seen := m.Seen(dt.Incarnation)
	dt.Exit, dt.Message = m.oom(dt)
	accounted := false
	var state herd.State
	err = m.st.Update(ctx, func(tx store.Tx) error {
		accounted = false
		s, err := tx.Session(dt.Session)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		inc, err := tx.Incarnation(dt.Incarnation)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if s.Incarnation != inc.ID || inc.EndedAt != nil || !s.State.Live() {
			return nil // already accounted, or superseded
		}
		accounted = true
		err = m.crashTx(tx, &s, &inc, dt.Exit, dt.Message, seen, time.Now().UTC())
		state = s.State
		return err
	})
	if err == nil && accounted {
		if !Succeeded(dt.Exit) {
			m.Metrics.Crash(dt.Exit.Reason)
		}
		// One line in the log for each agent that ended on its own: the
		// events say it too, but a log read alone (a failed test's, a
		// support request's) otherwise never shows that one died.
		m.log.Info("agent ended", "session", dt.Session, "incarnation", dt.Incarnation, "reason", dt.Exit.Reason,
			"code", exitCode(dt.Exit), "signal", exitSignal(dt.Exit), "then", state)
		w := ChangeState | ChangeEnded | ChangeDied
		if dt.Leftover {
			w |= ChangeLeftover
		}
		m.publish(Change{Session: dt.Session, Incarnation: dt.Incarnation, What: w, State: state, Activity: herd.ActivityUnknown})
	}
	return accounted, err
}

// crashTx ends inc and applies the role's restart policy to s, inside tx.
// It is the only place that changes crash bookkeeping. seen is what the
// watchdog saw of the incarnation (the watchdog's summary data), nil when nothing.
func (m *Manager) crashTx(tx store.Tx, s *herd.Session, inc *herd.Incarnation, exit herd.Exit, msg string, seen map[string]any, now time.Time) error {
	exit.At = now
	inc.EndedAt = &now
	inc.Exit = &exit
	takeSeenSessionID(inc, seen)
	if err := tx.PutIncarnation(*inc); err != nil {
		return err
	}
	policy := m.defaults
	if role, err := tx.Role(s.Role); err == nil {
		policy = role.Restart
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	} else {
		policy.Policy = herd.PolicyNever // no role: nothing to relaunch from
	}
	success := Succeeded(exit)
	out := restart.Decide(policy, restart.Tracker{Restarts: s.Restarts}, restart.Ending{Success: success, RanFor: now.Sub(inc.StartedAt)})
	limited := false
	if !success && out.Decision == restart.Relaunch {
		// An agent that ended on a rate limit with a named reset is not a
		// crash: it relaunches at the reset, its restart count and
		// backoff untouched.
		reset, ok, err := limitedUntil(tx, *s, inc.ID, now)
		if err != nil {
			return err
		}
		if !ok {
			reset, ok = limitedSeen(seen, now)
		}
		if ok {
			limited = true
			out.Restarts, out.Delay = s.Restarts, reset.Sub(now)
		}
	}

	data := exitData(exit)
	data["ran_for"] = now.Sub(inc.StartedAt).Round(time.Millisecond).String()
	if msg == "" {
		msg = describeExit(exit)
	}
	events := []*herd.Event{m.Event(*s, inc.ID, herd.EventExited, exit.Reason, msg, data), m.summaryEvent(*s, *inc, seen, now, false)}

	s.Exit = &exit
	s.Runtime, s.Process = herd.Dead, herd.Dead
	s.Activity = herd.ActivityUnknown // the agent that did it is gone
	s.Restarts = out.Restarts
	s.BackoffUntil = nil
	s.StateSince = now
	if !success && !limited {
		s.LastCrashAt = &now
		events = append(events, m.Event(*s, inc.ID, herd.EventCrashed, exit.Reason, msg, exitData(exit)))
	}
	switch out.Decision {
	case restart.Relaunch:
		until := now.Add(out.Delay)
		s.State = herd.StateBackoff
		s.BackoffUntil = &until
		if out.Delay == 0 {
			s.State = herd.StateCrashed
		}
		reason, what := exit.Reason, fmt.Sprintf("restart %d in %s", out.Restarts, out.Delay)
		if limited {
			reason, what = reasonRateLimited, fmt.Sprintf("ended on a rate limit: relaunched at its reset, in %s (no crash counted)", out.Delay)
		}
		events = append(events, m.Event(*s, inc.ID, herd.EventBackoff, reason, what,
			map[string]any{"restarts": out.Restarts, "delay": out.Delay.String(), "backoff_until": until.Format(time.RFC3339Nano)}))
	case restart.Fail:
		s.State = herd.StateFailed
		events = append(events, m.Event(*s, inc.ID, herd.EventFailed, exit.Reason, out.Reason, map[string]any{"restarts": out.Restarts}))
	case restart.Succeed:
		s.State = herd.StateSucceeded
		events = append(events, m.Event(*s, inc.ID, herd.EventSucceeded, exit.Reason, out.Reason, nil))
	}
	if err := tx.PutSession(*s); err != nil {
		return err
	}
	for _, e := range events {
		// Every event of the death bears the time the backoff counts
		// from: a relaunch is never seen earlier than its delay after it.
		e.Time = now
		if err := tx.AppendEvent(e); err != nil {
			return err
		}
	}
	return nil
}

// takeSeenSessionID records on inc the agent's own session id the watchdog
// read last (seen's agent_session_id: the final lines of a run too short
// for a tick), when inc has none yet, so a resume can continue it.
func takeSeenSessionID(inc *herd.Incarnation, seen map[string]any) {
	if id, ok := seen["agent_session_id"].(string); ok && inc.AgentSessionID == "" && agents.ValidSessionID(id) {
		inc.AgentSessionID = id
	}
}

// summaryEvent is the one summary of an ended incarnation: duration, exit,
// the agent's session id, and what the watchdog saw (seen). An incarnation
// whose start was never recorded (written ahead of its launch, neither
// started nor adopted since: no process on record) ends as a launch that
// never started, so that every incarnation's story in the log has a
// beginning — unless a process of it was found running at its end
// (found: adopted on the record, then stopped).
func (m *Manager) summaryEvent(s herd.Session, inc herd.Incarnation, seen map[string]any, now time.Time, found bool) *herd.Event {
	data := map[string]any{"duration": now.Sub(inc.StartedAt).Round(time.Millisecond).String()}
	if inc.Exit != nil {
		data["exit"] = inc.Exit
	}
	if inc.AgentSessionID != "" {
		data["agent_session_id"] = inc.AgentSessionID
	}
	for k, v := range seen {
		data[k] = v
	}
	reason := ""
	if inc.Exit != nil {
		reason = inc.Exit.Reason
	}
	msg := fmt.Sprintf("incarnation ran %s", data["duration"])
	if inc.Root.PID == 0 && !found && reason != herd.ReasonLaunchFailed {
		data["ended_by"] = reason
		reason = herd.ReasonNeverStarted
		msg = fmt.Sprintf("launch never recorded as started; ended after %s", data["duration"])
	}
	return m.Event(s, inc.ID, herd.EventSummary, reason, msg, data)
}

func exitData(e herd.Exit) map[string]any {
	m := map[string]any{}
	if e.Code != nil {
		m["code"] = *e.Code
	}
	if e.Signal != nil {
		m["signal"] = *e.Signal
	}
	return m
}

func describeExit(e herd.Exit) string {
	switch {
	case e.Signal != nil:
		return fmt.Sprintf("killed by signal %d", *e.Signal)
	case e.Code != nil:
		return fmt.Sprintf("exited with code %d", *e.Code)
	case e.Reason == herd.ReasonPaneGone:
		return "tmux pane vanished"
	case e.Reason == herd.ReasonProcessGone:
		return "agent process is gone"
	}
	return e.Reason
}

// Succeeded reports whether an exit is a success (code 0), not a crash.
func Succeeded(e herd.Exit) bool {
	return e.Reason == herd.ReasonExitCode && e.Code != nil && *e.Code == 0
}

// oom returns the exit and message to record for a death: the kernel's OOM
// kill of the incarnation's tree when its cgroup counted one (the agent
// itself, or a child whose loss ended it), else dt's own. A death herd
// caused on purpose (a stall kill, memory_max) keeps its reason.
func (m *Manager) oom(dt Death) (herd.Exit, string) {
	switch dt.Exit.Reason {
	case herd.ReasonExitCode, herd.ReasonSignal, herd.ReasonProcessGone, herd.ReasonPaneGone:
	default:
		return dt.Exit, dt.Message
	}
	if m.OOMKilled == nil || !m.OOMKilled(dt.Incarnation) {
		return dt.Exit, dt.Message
	}
	exit := dt.Exit
	exit.Reason = herd.ReasonOOM
	return exit, "killed by the kernel for its memory_max (out of memory)"
}

// reasonRateLimited is the reason of an activity event of a turn ended by
// a rate limit (agents.ReasonRateLimited), and of the backoff event of an
// agent that ended on one.
const reasonRateLimited = "rate_limited"

// limitedUntil reports whether session s's incarnation inc ended blocked
// on a rate limit of its own whose reset, named in its last activity
// event, is still to come at now; until is that reset.
func limitedUntil(tx store.Tx, s herd.Session, inc string, now time.Time) (until time.Time, ok bool, err error) {
	if s.Activity != herd.ActivityBlocked {
		return time.Time{}, false, nil
	}
	evs, err := tx.Events(store.EventFilter{Session: s.Name, Kind: herd.EventActivity, Limit: 1})
	if err != nil || len(evs) != 1 {
		return time.Time{}, false, err
	}
	ev := evs[0]
	if src, _ := ev.Data["source"].(string); ev.Incarnation != inc || ev.Reason != reasonRateLimited || src == "account" {
		// A session blocked by another's limit on its account that dies
		// died of something else.
		return time.Time{}, false, nil
	}
	raw, _ := ev.Data["reset_at"].(string)
	t, perr := time.Parse(time.RFC3339, raw)
	if perr != nil || !t.After(now) {
		return time.Time{}, false, nil
	}
	return t, true, nil
}

// limitedSeen reports whether what the watchdog saw last of an
// incarnation (its summary: a run shorter than a tick is read whole at
// its death) is a turn ended on a rate limit naming a reset still to come
// at now; until is that reset.
func limitedSeen(seen map[string]any, now time.Time) (until time.Time, ok bool) {
	act, _ := seen["activity"].(herd.Activity)
	if a, isString := seen["activity"].(string); isString {
		act = herd.Activity(a)
	}
	text, _ := seen["error"].(string)
	if act != herd.ActivityBlocked || !agents.IsRateLimit(text) {
		return time.Time{}, false
	}
	return agents.ParseResetTime(text, now)
}

// exitCode and exitSignal are an exit's code and signal for a log line
// (-1: none).
func exitCode(e herd.Exit) int {
	if e.Code == nil {
		return -1
	}
	return *e.Code
}

func exitSignal(e herd.Exit) int {
	if e.Signal == nil {
		return -1
	}
	return *e.Signal
}
