package stalls

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/api"
	"herd/internal/slots"
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
func (w *Stalls) ApplyReport(ctx context.Context, rep api.ActivityReport, spooled bool) (string, error) {
	if rep.Session == "" || rep.Incarnation == "" {
		return "", slots.Badf("activity: session and incarnation are required")
	}
	now := time.Now()
	at := rep.At
	if at.IsZero() || at.After(now) {
		at = now
	}
	var s herd.Session
	var inc herd.Incarnation
	var role herd.Role
	err := w.st.Store().View(ctx, func(tx store.Tx) (err error) {
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
	if errors.Is(err, store.ErrNotFound) {
		return "ignored: unknown session or incarnation", nil
	}
	if err != nil {
		return "", err
	}
	kind := role.Agent
	if kind == "" || kind == herd.AgentGeneric {
		kind = rep.Agent // the hook's own word, when the role names no agent
	}
	if kind == "" || kind == herd.AgentGeneric {
		kind = herd.AgentClaude // hooks are Claude Code's unless said otherwise
	}
	h, err := parseReport(kind, rep, now)
	if err != nil {
		return "", slots.Badf("activity: %v", err)
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
	m.mu.Lock()
	prev := m.hook
	// A spooled report older than the last one applied (spool files
	// ingested late, or out of order) would turn a later Stop back into
	// working: counted only. Live reports apply in the order they come,
	// whatever the clock did meanwhile.
	stale := spooled && at.Before(m.hookAt)
	next := prev
	if !stale {
		next = agents.Apply(prev, h)
	}
	// From the first hook on, hooks (not output) drive the activity axis.
	m.hookSeen = true
	m.hooks++
	m.mu.Unlock()
	if stale {
		return fmt.Sprintf("%s: %s (a report older than the last applied; counted, not applied)", s.Name, prev.Activity), nil
	}
	// Progress moves the stall clock; an idle reminder or a retry does
	// not, a change of activity does.
	real := h.Progress || next.Activity != prev.Activity

	seen := status.Seen{Session: s.Name, Incarnation: inc.ID, Activity: next.Activity, Source: "hook", What: h.Event, Tool: next.Tool,
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
	applied, err := w.st.Activity(ctx, seen)
	if err != nil {
		return "", fmt.Errorf("activity: %w", err)
	}
	if !applied {
		return "ignored: not the current incarnation", nil
	}
	m.mu.Lock()
	m.hook = next
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
	m.mu.Unlock()
	return fmt.Sprintf("%s: %s", s.Name, next.Activity), nil
}

// parseReport reads one report with the parser of agent kind: a hook
// payload, or Codex's notify JSON (`herd hook notify '<json>'`).
func parseReport(kind string, rep api.ActivityReport, now time.Time) (agents.Signal, error) {
	if kind == herd.AgentCodex && rep.Event == "notify" {
		return agents.ParseCodexNotify(rep.Payload)
	}
	return agents.ParseHook(kind, rep.Payload, rep.Event, now)
}
