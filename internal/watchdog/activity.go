package watchdog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/api"
	"herd/internal/errs"
	"herd/internal/status"
	"herd/internal/store"
)

// MaxReportBody bounds a POST /v1/activity body: the hook payload limit,
// base64-encoded, plus the envelope.
const MaxReportBody = agents.MaxPayload*4/3 + 4096

// ApplyReport maps one hook event onto its session through its agent
// kind's activity table (agents.ParseHook: a session starting or a turn
// ending -> idle, tools -> working, a permission request -> waiting, a turn
// ended by a rate limit or an API error -> blocked), the time of the last
// progress (an idle reminder or a retry is none), and the agent's own
// session id. An activity event is
// written on transitions only. A report for an incarnation that is no
// longer current is dropped.
func (w *Watchdog) ApplyReport(ctx context.Context, rep api.ActivityReport, spooled bool) (string, error) {
	if rep.Session == "" || rep.Incarnation == "" {
		return "", errs.Badf("activity: session and incarnation are required")
	}
	now := time.Now()
	at := rep.At
	if at.IsZero() || at.After(now) {
		at = now
	}
	s, inc, role, err := w.readReport(ctx, rep)
	if errors.Is(err, store.ErrNotFound) {
		return "ignored: unknown session or incarnation", nil
	}
	if err != nil {
		return "", err
	}
	h, err := parseReport(reportKind(role, rep), rep, now)
	if err != nil {
		return "", errs.Badf("activity: %v", err)
	}
	for _, note := range h.Notes {
		w.o.Log.Warn("activity: part of a hook report ignored", "session", rep.Session, "why", note)
	}
	if s.Host != w.st.Host() || s.Incarnation != inc.ID || inc.EndedAt != nil || !s.State.Live() {
		return "ignored: not the current incarnation", nil
	}

	m := w.watchFor(s, inc)
	m.hookMu.Lock()
	defer m.hookMu.Unlock()
	// A report delivered once already (live, its answer late) comes
	// again from the spool: it is dropped, neither counted nor applied.
	key := hookKey{at: rep.At.UnixNano(), event: rep.Event}
	keyed := !rep.At.IsZero()
	prev, next, stale, dup := m.nextHook(h, at, spooled, key, keyed)
	if dup {
		return fmt.Sprintf("%s: ignored: the report was applied already", s.Name), nil
	}
	if stale {
		return fmt.Sprintf("%s: %s (a report older than the last applied; counted, not applied)", s.Name, prev.Activity), nil
	}
	// Progress moves the stall clock; an idle reminder or a retry does
	// not, a change of activity does.
	real := h.Progress || next.Activity != prev.Activity
	applied, err := w.st.Activity(ctx, hookSeen(s.Name, inc, h.Event, prev, next, at, real))
	if err != nil {
		return "", fmt.Errorf("activity: %w", err)
	}
	if !applied {
		return "ignored: not the current incarnation", nil
	}
	m.hookApplied(next, at, real, key, keyed)
	return fmt.Sprintf("%s: %s", s.Name, next.Activity), nil
}

// readReport reads the session, its role (zero when the role is gone: the
// session's agent is still one) and the incarnation a report names.
func (w *Watchdog) readReport(ctx context.Context, rep api.ActivityReport) (s herd.Session, inc herd.Incarnation, role herd.Role, err error) {
	err = w.st.Store().View(ctx, func(tx store.Tx) (err error) {
		if s, err = tx.Session(rep.Session); err != nil {
			return err
		}
		if role, err = tx.Role(s.Role); errors.Is(err, store.ErrNotFound) {
			err = nil // the role is gone: the session's agent is still one
		}
		if err != nil {
			return err
		}
		inc, err = tx.Incarnation(rep.Incarnation)
		return err
	})
	return s, inc, role, err
}

// reportKind is the agent kind whose parser reads a report: the role's,
// else the hook's own word, else Claude Code's (hooks are its unless said
// otherwise).
func reportKind(role herd.Role, rep api.ActivityReport) string {
	kind := role.Agent
	if kind == "" || kind == herd.AgentGeneric {
		kind = rep.Agent
	}
	if kind == "" || kind == herd.AgentGeneric {
		kind = herd.AgentClaude
	}
	return kind
}

// nextHook counts a hook report and returns the hook state before and
// after it. A spooled report older than the last one applied (spool files
// ingested late, or out of order) would turn a later Stop back into
// working: it is stale, counted only. Live reports apply in the order they
// come, whatever the clock did meanwhile. The caller holds hookMu.
func (m *incWatch) nextHook(h agents.Signal, at time.Time, spooled bool, key hookKey, keyed bool) (prev, next agents.State, stale, dup bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if keyed && m.appliedLocked(key) {
		return m.hook, m.hook, false, true
	}
	prev = m.hook
	stale = spooled && at.Before(m.hookAt)
	next = prev
	if !stale {
		next = agents.Apply(prev, h)
	}
	// From the first hook on, hooks (not output) drive the activity axis.
	m.hookSeen = true
	m.hooks++
	if stale && keyed {
		m.noteAppliedLocked(key)
	}
	return prev, next, stale, false
}

// hookSeen is what a hook report says the writer saw; real: it was
// progress, so it moves the activity clock.
func hookSeen(session string, inc herd.Incarnation, event string, prev, next agents.State, at time.Time, real bool) status.Seen {
	seen := status.Seen{Session: session, Incarnation: inc.ID, Activity: next.Activity, Source: "hook", What: event, Tool: next.Tool,
		SessionEnd: next.Ended && !prev.Ended}
	if real {
		seen.At = at
	}
	if next.Activity == herd.ActivityBlocked {
		seen.Reason = next.Reason
		seen.Data = map[string]any{"error": next.Error}
		if !next.ResetAt.IsZero() {
			seen.Data["reset_at"] = next.ResetAt.UTC().Format(time.RFC3339)
		}
	}
	if next.AgentSessionID != "" && next.AgentSessionID != inc.AgentSessionID {
		seen.AgentSessionID = next.AgentSessionID
	}
	if seen.SessionEnd {
		seen.AgentSessionID = next.AgentSessionID
	}
	return seen
}

// hookApplied keeps, once the writer applied a report, its hook state and
// times, and the report's key (keyed: it has one) against a second
// delivery. The caller holds hookMu.
func (m *incWatch) hookApplied(next agents.State, at time.Time, real bool, key hookKey, keyed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hook = next
	if keyed {
		m.noteAppliedLocked(key)
	}
	if at.After(m.hookAt) {
		m.hookAt = at
	}
	if real {
		m.noteActivityLocked(at)
		if !at.Before(m.persisted) {
			m.persisted = at
		}
	}
	if next.AgentSessionID != "" {
		m.agentSessionID = next.AgentSessionID
	}
}

// parseReport reads one report with the parser of agent kind: a hook
// payload, or Codex's notify JSON (`herd hook notify '<json>'`).
func parseReport(kind string, rep api.ActivityReport, now time.Time) (agents.Signal, error) {
	if kind == herd.AgentCodex && rep.Event == "notify" {
		return agents.ParseCodexNotify(rep.Payload)
	}
	return agents.ParseHook(kind, rep.Payload, rep.Event, now)
}
