package watchdog

import (
	"context"
	"errors"
	"herd"
	"herd/internal/agents"
	"herd/internal/api"
	"herd/internal/diag"
	"herd/internal/status"
	"herd/internal/store"
	"time"
)

// persistEvery is how far the in-memory last activity may run ahead of the
// stored one before it is written.
func (w *Watchdog) persistEvery() time.Duration {
	g := w.cfg().Watchdog.StallAfter / 10
	if g <= 0 || g > maxPersistEvery {
		return maxPersistEvery
	}
	return g
}

// persistActivity writes what the tick learned: last activity time, the
// activity an exec agent's output implies (only while it sends no hooks),
// and the agent's own session id. it is the tick's own, not copied.
func (w *Watchdog) persistActivity(ctx context.Context, it *watchItem) {
	m := it.m
	peek := m.tracker.Snapshot()
	m.mu.Lock()
	last, persisted := m.lastActivity, m.persisted
	outAct := herd.Activity("")
	if it.Inc.RuntimeKind != herd.RuntimeTmux && !m.hookSeen {
		outAct = peek.Activity
	}
	sid := peek.AgentSessionID
	if sid == "" {
		sid = m.hook.AgentSessionID
	}
	newSID := sid != "" && sid != m.agentSessionID
	m.mu.Unlock()

	stored := time.Time{}
	if it.S.LastActivityAt != nil {
		stored = *it.S.LastActivityAt
	}
	needTime := last.After(persisted) && last.Sub(stored) >= w.persistEvery()
	needAct := outAct != "" && outAct != it.S.Activity
	if !needTime && !needAct && !newSID {
		return
	}
	// The write below keeps the snapshot: it is copied to the heap only
	// when there is a write.
	snap := peek
	seen := status.Seen{Session: it.S.Name, Incarnation: it.Inc.ID, At: last}
	if needAct {
		seen.Activity, seen.Source, seen.What, seen.Tool = outAct, "output", snap.LastType, snap.LastTool
		if outAct == herd.ActivityBlocked {
			seen.Reason, seen.Data = snap.Reason, map[string]any{"error": snap.Error}
			if !snap.ResetAt.IsZero() {
				// The reset named in the stream: the account's other
				// sessions wait for it (auto-continue).
				seen.Data["reset_at"] = snap.ResetAt.UTC().Format(time.RFC3339)
			}
		}
		// Hooks, once seen, drive the activity axis: output yields.
		seen.Yield = func() bool {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.hookSeen
		}
	}
	if newSID {
		seen.AgentSessionID = sid
	}
	applied, err := w.st.Activity(ctx, seen)
	if err != nil {
		w.o.Log.Warn("watchdog: record activity", "session", it.S.Name, "err", err)
		return
	}
	if !applied {
		return
	}
	m.mu.Lock()
	m.persisted = last
	if newSID {
		m.agentSessionID = sid
	}
	if needAct && !m.hookSeen {
		m.hook.Activity, m.hook.Reason = outAct, snap.Reason
	}
	m.mu.Unlock()
}

// Describe adds a fresh /proc sample and what the watchdog knows
// to `describe session`.
func (w *Watchdog) Describe(det *api.SessionDetail) {
	if !det.State.Live() || det.Identity == nil || det.Root == nil {
		return
	}
	inc := herd.Incarnation{ID: det.Incarnation, Identity: *det.Identity, Root: *det.Root}
	m := w.lookup(det.Incarnation)
	var prev *diag.Diagnostics
	if m != nil {
		m.mu.Lock()
		prev = m.prev
		m.mu.Unlock()
	}
	now := time.Now()
	if sample, err := w.sampleTree(inc, prev, now); err == nil {
		det.Diagnostics = sample
		if m != nil {
			m.mu.Lock()
			m.prev = &sample
			m.mu.Unlock()
		}
	}
	if m == nil {
		return
	}
	snap := m.tracker.Snapshot()
	snap.StderrTail = nil // shown as stderr_tail already
	m.mu.Lock()
	defer m.mu.Unlock()
	detail := map[string]any{
		"silence":          now.Sub(m.lastActivity).Round(time.Millisecond).String(),
		"last_activity_at": m.lastActivity.UTC(),
		"in_tool":          m.hook.InTool,
		"tool":             m.hook.Tool,
		"last_hook":        m.hook.LastEvent,
		"hook_events":      m.hooks,
		"stalls":           m.stalls,
		"stall_warnings":   m.warnings,
		"longest_silence":  m.longest.Round(time.Millisecond).String(),
	}
	if m.runtime != herd.RuntimeTmux {
		detail["output"] = snap
	}
	if m.captures > 0 {
		detail["screen_captures"] = m.captures
		detail["screen_captured_at"] = m.capturedAt.UTC()
	}
	if m.transcript.path != "" {
		detail["transcript"] = m.transcript.path
	}
	if m.killWhy != "" {
		detail["auto_kill"] = m.killWhy
	}
	det.ActivityDetail = detail
}

// maxFlushWait bounds the wait for an ended exec agent's output to reach
// its files.
const maxFlushWait = 500 * time.Millisecond

// Summary returns what the watchdog knows about an ending incarnation,
// for its summary event; nil when nothing is known. The memory itself is
// dropped by the next tick.
func (w *Watchdog) Summary(inc string) map[string]any {
	m := w.lookup(inc)
	if m == nil {
		m = w.lateWatch(inc)
	}
	if m == nil {
		return nil
	}
	if m.runtime != herd.RuntimeTmux {
		// The last lines before the exit, once the capture process wrote
		// them all.
		if ch := w.o.Exec.Flushed(inc); ch != nil {
			t := time.NewTimer(maxFlushWait)
			select {
			case <-ch:
			case <-t.C:
			}
			t.Stop()
		}
		w.pollOutput(m, time.Now())
	}
	snap := m.tracker.Snapshot()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ended = true
	longest := m.longest
	if tail := time.Since(m.lastActivity); tail > longest {
		longest = tail
	}
	data := map[string]any{
		"events":          snap.Events,
		"hook_events":     m.hooks,
		"stalls":          m.stalls,
		"stall_warnings":  m.warnings,
		"longest_silence": longest.Round(time.Millisecond).String(),
	}
	last := snap.LastType
	if last == "" {
		last = m.hook.LastEvent
	}
	if last != "" {
		data["last_event_type"] = last
	}
	if tool := firstNonEmpty(snap.LastTool, m.hook.LastTool); tool != "" {
		data["last_tool"] = tool
	}
	if sid := firstNonEmpty(snap.AgentSessionID, m.hook.AgentSessionID); sid != "" {
		data["agent_session_id"] = sid
	}
	// The activity the agent ended with: its last lines (a run shorter
	// than a tick is read whole here), else its hooks.
	act, errText := m.hook.Activity, m.hook.Error
	if !m.hookSeen && snap.Activity != "" {
		act, errText = snap.Activity, snap.Error
	}
	if act != "" && act != herd.ActivityUnknown {
		data["activity"] = act
	}
	if act == herd.ActivityBlocked && errText != "" {
		data["error"] = errText
	}
	if snap.Retries > 0 {
		data["retries"] = snap.Retries
	}
	if snap.StderrLines > 0 {
		data["stderr_lines"] = snap.StderrLines
	}
	return data
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// lateWatch returns the memory of an exec incarnation that ended before
// any tick met it (a run shorter than a probe interval), so its output is
// still read whole: its activity and session id are not lost. nil when
// there is nothing to read.
func (w *Watchdog) lateWatch(id string) *incWatch {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg().Probe.Timeout)
	defer cancel()
	var s herd.Session
	var inc herd.Incarnation
	var role herd.Role
	err := w.st.Store().View(ctx, func(tx store.Tx) (err error) {
		if inc, err = tx.Incarnation(id); err != nil {
			return err
		}
		if inc.RuntimeKind == herd.RuntimeTmux {
			return nil
		}
		if s, err = tx.Session(inc.Session); err != nil {
			return err
		}
		if role, err = tx.Role(s.Role); errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		return err
	})
	if err != nil || inc.RuntimeKind == herd.RuntimeTmux || inc.ID == "" {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			w.o.Log.Warn("watchdog: read an ended incarnation", "incarnation", id, "err", err)
		}
		return nil
	}
	m := w.watchFor(s, inc)
	m.mu.Lock()
	if m.kind == "" {
		m.kind = role.Agent
		if !agents.Known(m.kind) {
			m.kind = herd.AgentGeneric
		}
	}
	m.mu.Unlock()
	return m
}
