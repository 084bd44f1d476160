package watchdog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herd"
	"herd/internal/diag"
	"herd/internal/slots"
	"herd/internal/stallpolicy"
)

// stall marks a silent running session stalled, with diagnostics.
func (w *Watchdog) stall(ctx context.Context, it watchItem, v stallpolicy.Verdict, sample *diag.Diagnostics, sampleErr error, now time.Time) {
	m := it.m
	data := w.stallData(m, v, sample, sampleErr)
	msg := fmt.Sprintf("no output or activity for %s (threshold %s)%s", roundDur(v.Silence), v.Threshold, diagSummary(sample))
	applied, err := w.st.Stalled(ctx, it.S.Name, it.Inc.ID, now, msg, data)
	if err != nil {
		if ctx.Err() == nil {
			w.o.Log.Error("watchdog: mark stalled", "session", it.S.Name, "err", err)
		}
		return
	}
	if !applied {
		return
	}
	w.o.Log.Warn("agent stalled", "session", it.S.Name, "silence", roundDur(v.Silence))
	w.st.Metrics.Stall(it.S.Role)
	m.mu.Lock()
	m.stalls++
	m.stallWarnings = 0
	m.lastWarn = now
	m.killWhy = ""
	m.mu.Unlock()
}

// warn repeats the stall warning with fresh diagnostics and a count.
func (w *Watchdog) warn(ctx context.Context, it watchItem, v stallpolicy.Verdict, sample *diag.Diagnostics, sampleErr error, now time.Time) {
	m := it.m
	m.mu.Lock()
	count := m.stallWarnings + 1
	m.mu.Unlock()
	data := w.stallData(m, v, sample, sampleErr)
	data["count"] = count
	data["stalled_for"] = roundDur(now.Sub(it.S.StateSince))
	msg := fmt.Sprintf("still no output or activity after %s (warning %d)%s", roundDur(v.Silence), count, diagSummary(sample))
	applied, err := w.st.StallWarning(ctx, it.S.Name, it.Inc.ID, msg, data)
	if err != nil {
		if ctx.Err() == nil {
			w.o.Log.Error("watchdog: stall warning", "session", it.S.Name, "err", err)
		}
		return
	}
	if !applied {
		return
	}
	m.mu.Lock()
	m.stallWarnings = count
	m.warnings++
	m.lastWarn = now
	m.mu.Unlock()
}

// unstall returns a stalled session to running once it shows activity
// again (or turns out to wait for a person, which is not a stall).
func (w *Watchdog) unstall(ctx context.Context, it watchItem, now time.Time) {
	m := it.m
	m.mu.Lock()
	warnings, act := m.stallWarnings, m.activityLocked()
	m.mu.Unlock()
	stalledFor := roundDur(now.Sub(it.S.StateSince))
	msg := fmt.Sprintf("activity again after %s stalled", stalledFor)
	if stallpolicy.Exempt(act) {
		msg = fmt.Sprintf("agent is %s after %s stalled", act, stalledFor)
	}
	applied, err := w.st.Unstalled(ctx, it.S.Name, it.Inc.ID, now, msg,
		map[string]any{"stalled_for": stalledFor, "warnings": warnings, "activity": act})
	if err != nil {
		if ctx.Err() == nil {
			w.o.Log.Error("watchdog: unstall", "session", it.S.Name, "err", err)
		}
		return
	}
	if applied {
		m.mu.Lock()
		m.stallWarnings = 0
		m.killBase = nil
		m.killWhy = ""
		m.mu.Unlock()
	}
}

// stallData is the common data of stall events.
func (w *Watchdog) stallData(m *incWatch, v stallpolicy.Verdict, sample *diag.Diagnostics, sampleErr error) map[string]any {
	snap := m.tracker.Snapshot()
	m.mu.Lock()
	defer m.mu.Unlock()
	data := map[string]any{
		"silence":          roundDur(v.Silence),
		"threshold":        v.Threshold.String(),
		"last_activity_at": m.lastActivity.UTC().Format(time.RFC3339Nano),
		"activity":         m.activityLocked(),
		"in_tool":          m.hook.InTool,
	}
	if m.hook.Tool != "" {
		data["tool"] = m.hook.Tool
	}
	if last := firstNonEmpty(snap.LastType, m.hook.LastEvent); last != "" {
		data["last_event_type"] = last
	}
	if snap.Events > 0 {
		data["events"] = snap.Events
	}
	if m.killWhy != "" {
		data["auto_kill"] = m.killWhy
	}
	switch {
	case sample != nil:
		data["diagnostics"] = *sample
	case sampleErr != nil:
		data["diagnostics_error"] = sampleErr.Error()
	}
	return data
}

// diagSummary is a short reading of a sample for event messages.
func diagSummary(s *diag.Diagnostics) string {
	if s == nil {
		return ""
	}
	cpu := "cpu ?"
	if s.CPUPercent != nil {
		cpu = fmt.Sprintf("cpu %.1f%%", *s.CPUPercent)
	}
	out := fmt.Sprintf("; %s, %s, %d tcp, %d children", s.ProcState, cpu, s.TCPEstablished, len(s.Children))
	if s.WChan != "" {
		out += ", waiting in " + s.WChan
	}
	return out
}

func roundDur(d time.Duration) string { return d.Round(time.Millisecond).String() }

// stallKill takes down a stalled agent the watchdog found safe to kill,
// through slots' kill: a last look (still current, still stalled, still
// silent), the verified kill of the stop path, a killed event with the
// diagnostics, then the one crash-accounting function with reason
// stall_killed. While it runs, other reports of the same death are left to
// it, so exactly one crash is counted.
func (w *Watchdog) stallKill(ctx context.Context, it watchItem, sample diag.Diagnostics, why string) {
	m := it.m
	var stalledFor string
	lastLook := func(ctx context.Context) (string, map[string]any, error) {
		if it.Inc.RuntimeKind != herd.RuntimeTmux {
			w.pollOutput(m, time.Now())
		}
		cur, err := w.st.Session(ctx, it.S.Name)
		if err != nil {
			return "", nil, err
		}
		if cur.Incarnation != it.Inc.ID || cur.State != herd.StateStalled {
			return "", nil, errors.New("no longer the stalled incarnation")
		}
		m.mu.Lock()
		active := m.lastActivity.After(cur.StateSince) || stallpolicy.Exempt(m.activityLocked())
		m.mu.Unlock()
		if active {
			return "", nil, errors.New("activity again")
		}
		stalledFor = roundDur(time.Since(cur.StateSince))
		msg := fmt.Sprintf("killed after %s stalled: %s", stalledFor, why)
		return msg, map[string]any{"diagnostics": sample, "stalled_for": stalledFor, "why": why}, nil
	}
	killed, err := w.o.Slots.Kill(ctx, slots.KillRequest{Inc: it.Inc, Reason: herd.ReasonStallKilled, Guard: lastLook})
	switch {
	case err != nil:
		w.o.Log.Warn("watchdog: stalled agent not killed", "session", it.S.Name, "err", err)
	case killed:
		w.o.Log.Warn("stalled agent killed", "session", it.S.Name, "stalled_for", stalledFor)
	}
}
