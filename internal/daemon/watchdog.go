package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	"herd"
	"herd/internal/activity"
	"herd/internal/api"
	"herd/internal/diag"
	"herd/internal/execrt"
	"herd/internal/store"
	"herd/internal/watchdog"
)

// maxPersistEvery bounds how stale the stored last_activity_at of a busy
// session may be; between writes the watchdog works from memory.
const maxPersistEvery = 30 * time.Second

// watchdogLoop tracks each live session's output and activity every probe
// interval, marks silent ones stalled (with /proc diagnostics), warns again
// every stall_repeat, and kills a stalled agent only when that is safe and
// allowed. Agent hook reports spooled to files while the daemon was away
// are ingested alongside.
func (d *Daemon) watchdogLoop(ctx context.Context) {
	w := d.wd()
	defer w.kills.Wait()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { d.ingestLoop(ctx) })

	ticker := time.NewTicker(d.cfg.Probe.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		d.watchdogTick(ctx, time.Now())
	}
}

// watchItem is one live session with its current incarnation and memory.
type watchItem struct {
	liveItem
	m *incWatch
}

func (d *Daemon) wdConfig() watchdog.Config {
	c := d.cfg.Watchdog
	return watchdog.Config{StallAfter: c.StallAfter, StallRepeat: c.StallRepeat, LivenessTimeout: c.LivenessTimeout, AutoKill: c.StallAutoKill}
}

// watchdogTick is one round over this host's live sessions. Only sessions
// that are stalled or close to it are sampled in /proc.
func (d *Daemon) watchdogTick(ctx context.Context, now time.Time) {
	tickCtx, cancel := context.WithTimeout(ctx, d.cfg.Probe.Interval+d.cfg.Probe.Timeout)
	defer cancel()
	_, live, err := d.readLive(tickCtx)
	if err != nil {
		d.log.Error("watchdog: read store", "err", err)
		return
	}
	items := make([]watchItem, len(live))
	for i, it := range live {
		items[i].liveItem = it
	}
	w := d.wd()
	current := make(map[string]bool, len(items))
	var tmuxes []watchItem
	for i := range items {
		current[items[i].inc.ID] = true
		items[i].m = w.watchFor(items[i].s, items[i].inc)
		if items[i].inc.RuntimeKind == herd.RuntimeTmux {
			tmuxes = append(tmuxes, items[i])
		}
	}
	w.gc(current)
	d.watchTmux(tickCtx, tmuxes, now)
	for _, it := range items {
		if tickCtx.Err() != nil {
			return
		}
		d.watchOne(tickCtx, it, now)
	}
}

// watchOne folds new output into one session's memory, persists what
// changed, and acts on the stall classification.
func (d *Daemon) watchOne(ctx context.Context, it watchItem, now time.Time) {
	m := it.m
	if it.inc.RuntimeKind != herd.RuntimeTmux {
		d.pollOutput(m, now)
	}
	d.persistActivity(ctx, it)

	cfg := d.wdConfig()
	m.mu.Lock()
	in := watchdog.Input{
		State: it.s.State, Activity: m.activityLocked(), InTool: m.hook.InTool,
		LastActivity: m.lastActivity, StalledSince: it.s.StateSince, LastWarnAt: m.lastWarn,
		LastSampleAt: sampledAt(m.prev), KillBaseAt: sampledAt(m.killBase),
	}
	prev, base := m.prev, m.killBase
	m.mu.Unlock()
	v := watchdog.Classify(cfg, in, now)
	if v.Action == watchdog.Unstall {
		d.unstall(ctx, it, now)
		return
	}
	if v.Action == watchdog.None && !v.Sample && !v.KillBase && !v.KillCheck {
		return
	}

	// One sample per tick: against the kill window's base at a kill check,
	// else against the previous sample.
	from := prev
	if v.KillCheck {
		from = base
	}
	sample, sampleErr := d.sampleTree(it.inc, from, now)
	kill, why := false, ""
	m.mu.Lock()
	if sampleErr == nil {
		m.prev = &sample
		if v.KillBase {
			m.killBase = &sample
		}
	}
	if v.KillCheck {
		facts := watchdog.Facts{Sampled: sampleErr == nil}
		if sampleErr == nil {
			facts.CPU, facts.TCPEstablished = diag.CPUProgress(sample), sample.TCPEstablished
			m.killBase = &sample // the next check measures the next window
		}
		kill, why = watchdog.SafeToKill(cfg, facts)
		m.killWhy = why
	}
	m.mu.Unlock()
	if v.KillCheck && !kill {
		d.log.Info("stalled agent not killed", "session", it.s.Name, "why", why)
	}

	var got *diag.Diagnostics
	if sampleErr == nil {
		got = &sample
	}
	switch v.Action {
	case watchdog.Stall:
		d.stall(ctx, it, v, got, sampleErr, now)
	case watchdog.Warn:
		d.warn(ctx, it, v, got, sampleErr, now)
	}
	if kill && got != nil {
		w := d.wd()
		w.kills.Go(func() { d.stallKill(it, *got, why) })
	}
}

func sampledAt(s *diag.Diagnostics) time.Time {
	if s == nil {
		return time.Time{}
	}
	return s.SampledAt
}

// sampleTree collects /proc diagnostics of an incarnation's agent tree,
// after verifying the agent's identity (a reused pid is never sampled).
func (d *Daemon) sampleTree(inc herd.Incarnation, prev *diag.Diagnostics, now time.Time) (diag.Diagnostics, error) {
	id := inc.Identity
	if id.Zero() {
		id = inc.Root
	}
	if id.Zero() {
		return diag.Diagnostics{}, fmt.Errorf("watchdog: no agent process known yet")
	}
	if axis := d.proc.Check(id, d.bootID); axis != herd.Alive {
		return diag.Diagnostics{}, fmt.Errorf("watchdog: agent pid %d is %s", id.PID, axis)
	}
	s, err := d.wd().collector.Collect(id.PID, prev, now)
	if err != nil {
		return diag.Diagnostics{}, err
	}
	if id.StartTime != 0 && s.StartTime != id.StartTime {
		return diag.Diagnostics{}, fmt.Errorf("watchdog: pid %d was reused", id.PID)
	}
	return s, nil
}

// pollOutput reads what an exec agent appended to its stdout and stderr
// files, and keeps the files capped.
func (d *Daemon) pollOutput(m *incWatch, now time.Time) {
	m.tailMu.Lock()
	defer m.tailMu.Unlock()
	m.mu.Lock()
	ended := m.ended
	m.mu.Unlock()
	if ended {
		return
	}
	if m.stdout == nil {
		out, errPath := d.exec.Paths(m.session, m.id)
		m.stdout, m.stderr = &tailer{path: out}, &tailer{path: errPath}
	}
	onOut := func(b []byte, at time.Time) {
		m.tracker.Observe(activity.ParseLine(b), at)
		m.mu.Lock()
		m.noteActivityLocked(at)
		m.mu.Unlock()
	}
	onErr := func(b []byte, at time.Time) { m.tracker.ObserveStderr(string(b), at) }
	capBytes := d.exec.MaxLogBytes
	if capBytes <= 0 {
		capBytes = execrt.DefaultMaxLogBytes
	}
	for _, f := range []struct {
		t    *tailer
		line func([]byte, time.Time)
	}{{m.stdout, onOut}, {m.stderr, onErr}} {
		lost := f.t.lost
		if err := f.t.poll(now, f.line); err != nil {
			d.log.Debug("watchdog: read output", "session", m.session, "err", err)
			continue
		}
		if err := f.t.capFile(capBytes, now, f.line); err != nil {
			d.log.Warn("watchdog: cap output file", "path", f.t.path, "err", err)
		}
		if f.t.lost > lost {
			d.log.Warn("watchdog: agent output came faster than it is read; bytes skipped", "session", m.session, "path", f.t.path, "skipped", f.t.lost-lost, "skipped_total", f.t.lost)
		}
	}
}

// persistEvery is how far the in-memory last activity may run ahead of the
// stored one before it is written.
func (d *Daemon) persistEvery() time.Duration {
	g := d.cfg.Watchdog.StallAfter / 10
	if g <= 0 || g > maxPersistEvery {
		return maxPersistEvery
	}
	return g
}

// persistActivity writes what the tick learned: last activity time, the
// activity an exec agent's output implies (only while it sends no hooks),
// and the agent's own session id.
func (d *Daemon) persistActivity(ctx context.Context, it watchItem) {
	m := it.m
	snap := m.tracker.Snapshot()
	m.mu.Lock()
	last, persisted := m.lastActivity, m.persisted
	outAct := herd.Activity("")
	if it.inc.RuntimeKind != herd.RuntimeTmux && !m.hookSeen && snap.Events > 0 {
		outAct = herd.ActivityWorking
		if snap.LastFinal {
			outAct = herd.ActivityIdle
		}
	}
	sid := snap.AgentSessionID
	if sid == "" {
		sid = m.hook.AgentSessionID
	}
	newSID := sid != "" && sid != m.agentSessionID
	m.mu.Unlock()

	stored := time.Time{}
	if it.s.LastActivityAt != nil {
		stored = *it.s.LastActivityAt
	}
	needTime := last.After(persisted) && last.Sub(stored) >= d.persistEvery()
	needAct := outAct != "" && outAct != it.s.Activity
	if !needTime && !needAct && !newSID {
		return
	}
	applied := false
	err := d.update(ctx, it.s.Name, it.inc.ID, func(tx store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		applied = true
		var events []*herd.Event
		if cur.LastActivityAt == nil || last.After(*cur.LastActivityAt) {
			t := last.UTC()
			cur.LastActivityAt = &t
		}
		if needAct {
			m.mu.Lock()
			hooks := m.hookSeen
			m.mu.Unlock()
			if !hooks && cur.Activity != outAct {
				events = append(events, d.activityEvent(*cur, it.inc.ID, cur.Activity, outAct, "output", snap.LastType, snap.LastTool))
				cur.Activity = outAct
			}
		}
		if newSID {
			inc, err := tx.Incarnation(it.inc.ID)
			if err != nil {
				return nil, err
			}
			if inc.AgentSessionID != sid {
				inc.AgentSessionID = sid
				if err := tx.PutIncarnation(inc); err != nil {
					return nil, err
				}
			}
		}
		return events, nil
	})
	if err != nil {
		d.log.Warn("watchdog: record activity", "session", it.s.Name, "err", err)
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
		m.hook.Activity = outAct
	}
	m.mu.Unlock()
}

// activityEvent records a change of the activity axis.
func (d *Daemon) activityEvent(s herd.Session, inc string, from, to herd.Activity, source, what, tool string) *herd.Event {
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
	return d.event(s, inc, herd.EventActivity, source, msg, data)
}

// describeActivity adds a fresh /proc sample and what the watchdog knows
// to `describe session`.
func (d *Daemon) describeActivity(det *api.SessionDetail) {
	if !det.State.Live() || det.Identity == nil || det.Root == nil {
		return
	}
	inc := herd.Incarnation{ID: det.Incarnation, Identity: *det.Identity, Root: *det.Root}
	m := d.wd().lookup(det.Incarnation)
	var prev *diag.Diagnostics
	if m != nil {
		m.mu.Lock()
		prev = m.prev
		m.mu.Unlock()
	}
	now := time.Now()
	if sample, err := d.sampleTree(inc, prev, now); err == nil {
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
	if m.killWhy != "" {
		detail["auto_kill"] = m.killWhy
	}
	det.ActivityDetail = detail
}

// summaryData returns what the watchdog knows about an ending incarnation,
// for its summary event; nil when nothing is known. The memory itself is
// dropped by the next tick.
func (d *Daemon) summaryData(inc string) map[string]any {
	m := d.wd().lookup(inc)
	if m == nil {
		return nil
	}
	if m.runtime != herd.RuntimeTmux {
		d.pollOutput(m, time.Now()) // the last lines before the exit
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
	if tool := firstNonEmpty(snap.LastTool, m.hook.Tool); tool != "" {
		data["last_tool"] = tool
	}
	if sid := firstNonEmpty(snap.AgentSessionID, m.hook.AgentSessionID); sid != "" {
		data["agent_session_id"] = sid
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
