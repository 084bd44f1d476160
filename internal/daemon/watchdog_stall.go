package daemon

import (
	"context"
	"fmt"
	"time"

	"herd"
	"herd/internal/diag"
	"herd/internal/store"
	"herd/internal/watchdog"
)

// stall marks a silent running session stalled, with diagnostics.
func (d *Daemon) stall(ctx context.Context, it watchItem, v watchdog.Verdict, sample *diag.Diagnostics, sampleErr error, now time.Time) {
	m := it.m
	data := d.stallData(m, v, sample, sampleErr)
	msg := fmt.Sprintf("no output or activity for %s (threshold %s)%s", roundDur(v.Silence), v.Threshold, diagSummary(sample))
	applied := false
	err := d.update(ctx, it.s.Name, it.inc.ID, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		if cur.State != herd.StateRunning {
			return nil, nil
		}
		applied = true
		cur.State = herd.StateStalled
		cur.StateSince = now.UTC()
		return []*herd.Event{d.event(*cur, it.inc.ID, herd.EventStalled, "", msg, data)}, nil
	})
	if err != nil {
		d.log.Error("watchdog: mark stalled", "session", it.s.Name, "err", err)
		return
	}
	if !applied {
		return
	}
	d.log.Warn("agent stalled", "session", it.s.Name, "silence", roundDur(v.Silence))
	m.mu.Lock()
	m.stalls++
	m.stallWarnings = 0
	m.lastWarn = now
	m.killWhy = ""
	m.mu.Unlock()
}

// warn repeats the stall warning with fresh diagnostics and a count.
func (d *Daemon) warn(ctx context.Context, it watchItem, v watchdog.Verdict, sample *diag.Diagnostics, sampleErr error, now time.Time) {
	m := it.m
	m.mu.Lock()
	count := m.stallWarnings + 1
	m.mu.Unlock()
	data := d.stallData(m, v, sample, sampleErr)
	data["count"] = count
	data["stalled_for"] = roundDur(now.Sub(it.s.StateSince))
	msg := fmt.Sprintf("still no output or activity after %s (warning %d)%s", roundDur(v.Silence), count, diagSummary(sample))
	applied := false
	err := d.update(ctx, it.s.Name, it.inc.ID, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		if cur.State != herd.StateStalled {
			return nil, nil
		}
		applied = true
		return []*herd.Event{d.event(*cur, it.inc.ID, herd.EventStallWarning, "", msg, data)}, nil
	})
	if err != nil {
		d.log.Error("watchdog: stall warning", "session", it.s.Name, "err", err)
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
func (d *Daemon) unstall(ctx context.Context, it watchItem, now time.Time) {
	m := it.m
	m.mu.Lock()
	warnings, act := m.stallWarnings, m.activityLocked()
	m.mu.Unlock()
	stalledFor := roundDur(now.Sub(it.s.StateSince))
	msg := fmt.Sprintf("activity again after %s stalled", stalledFor)
	if watchdog.Exempt(act) {
		msg = fmt.Sprintf("agent is %s after %s stalled", act, stalledFor)
	}
	applied := false
	err := d.update(ctx, it.s.Name, it.inc.ID, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		if cur.State != herd.StateStalled {
			return nil, nil
		}
		applied = true
		cur.State = herd.StateRunning
		cur.StateSince = now.UTC()
		return []*herd.Event{d.event(*cur, it.inc.ID, herd.EventUnstalled, "", msg,
			map[string]any{"stalled_for": stalledFor, "warnings": warnings, "activity": act})}, nil
	})
	if err != nil {
		d.log.Error("watchdog: unstall", "session", it.s.Name, "err", err)
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
func (d *Daemon) stallData(m *incWatch, v watchdog.Verdict, sample *diag.Diagnostics, sampleErr error) map[string]any {
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

// stallKill takes down a stalled agent the watchdog found safe to kill:
// a last look (still current, still stalled, still silent), the verified
// kill of the stop path, a killed event with the diagnostics, then the one
// crash-accounting function with reason stall_killed. While it runs, other
// reports of the same death are ignored, so exactly one crash is counted.
func (d *Daemon) stallKill(it watchItem, sample diag.Diagnostics, why string) {
	w := d.wd()
	if !w.startKill(it.inc.ID) {
		return
	}
	defer w.endKill(it.inc.ID)
	ctx, cancel := context.WithTimeout(context.Background(), d.grace+15*time.Second)
	defer cancel()

	m := it.m
	if it.inc.RuntimeKind != herd.RuntimeTmux {
		d.pollOutput(m, time.Now())
	}
	var cur herd.Session
	err := d.st.View(ctx, func(tx store.Tx) (err error) {
		cur, err = tx.Session(it.s.Name)
		return err
	})
	if err != nil || cur.Incarnation != it.inc.ID || cur.State != herd.StateStalled {
		return
	}
	m.mu.Lock()
	active := m.lastActivity.After(cur.StateSince) || watchdog.Exempt(m.activityLocked())
	m.mu.Unlock()
	if active {
		return
	}
	stalledFor := roundDur(time.Since(cur.StateSince))
	if err := d.terminate(ctx, it.inc); err != nil {
		d.log.Warn("watchdog: stalled agent not killed", "session", it.s.Name, "err", err)
		return
	}
	msg := fmt.Sprintf("killed after %s stalled: %s", stalledFor, why)
	data := map[string]any{"diagnostics": sample, "stalled_for": stalledFor, "why": why}
	err = d.update(ctx, it.s.Name, it.inc.ID, func(tx store.Tx, s *herd.Session) ([]*herd.Event, error) {
		return []*herd.Event{d.event(*s, it.inc.ID, herd.EventKilled, herd.ReasonStallKilled, msg, data)}, nil
	})
	if err != nil {
		d.log.Error("watchdog: record kill", "session", it.s.Name, "err", err)
	}
	d.log.Warn("stalled agent killed", "session", it.s.Name, "stalled_for", stalledFor)
	if _, err := d.recordDeath(ctx, death{Session: it.s.Name, Incarnation: it.inc.ID,
		Exit: herd.Exit{Reason: herd.ReasonStallKilled}, Message: msg}); err != nil {
		d.log.Error("watchdog: record death", "session", it.s.Name, "err", err)
	}
}
