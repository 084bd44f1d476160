package watchdog

import (
	"context"
	"hash/fnv"
	"slices"
	"sort"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/loop"
	"herd/internal/stallpolicy"
	"herd/internal/status"
)

// maxPaneCaptures bounds the capture-pane calls of one watchdog tick;
// sessions left out are captured first at the next tick.
const maxPaneCaptures = 32

// capture is one pane the tick captures, and why.
type capture struct {
	it   watchItem
	pane string
	// last is when the pane was last captured: the longest waiting go first.
	last time.Time
}

// watchTmux folds the tmux evidence of progress into the memory of tmux
// sessions. window_activity (from the prober's last listing) says the
// pane printed something; for an agent herd can read (Claude, Codex,
// Gemini) that only asks for a capture, classified by the agent's screen
// rules: the normalised screen changing is progress (a spinner or a timer
// redrawing is not), the prompt back ends a turn (idle), a startup dialog
// is waiting. A capture is taken when window_activity moved (at most once
// per captureGap), once when a prompt seen needs confirming, or once per
// quietCaptureEvery. For other agents window_activity is output (tmux
// moves it on every byte the pane prints), so their panes are captured
// only where the listing shows no window_activity: then a session that
// looks silent has its pane hashed. An idle fleet of such agents costs no
// capture-pane at all.
func (w *Watchdog) watchTmux(ctx context.Context, items []watchItem, now time.Time) {
	if !slices.ContainsFunc(items, func(it watchItem) bool { return it.Inc.RuntimeKind == herd.RuntimeTmux }) {
		return
	}
	snap := w.o.Prober.Last()
	cfg := w.cfg()
	gap := captureGap(cfg.Watchdog.StallAfter, cfg.Probe.Interval)
	quietEvery := quietCaptureEvery(cfg.Watchdog.StallAfter, cfg.Probe.Interval)
	var caps []capture
	for _, it := range items {
		if it.Inc.RuntimeKind != herd.RuntimeTmux {
			continue
		}
		var wa time.Time
		if p, ok := snap.Own(it.S.Name, it.Inc.Root.PID); ok && !p.Activity.IsZero() {
			wa = p.Activity
		} else if r, ok := snap.Session(it.S.Name); ok && !r.Activity.IsZero() {
			wa = r.Activity
		}
		m := it.m
		m.mu.Lock()
		if wa.After(m.winActivity) {
			m.winActivity = wa
			if !screenKind(m.kind) {
				if wa.After(now) {
					wa = now
				}
				m.noteActivityLocked(wa)
			}
		}
		var want bool
		if screenKind(m.kind) {
			since := now.Sub(m.capturedAt)
			moved := m.winActivity.After(m.winCaptured)
			// The prompt seen, not yet taken for idle, and not captured
			// again since confirmIdle: one more look confirms it.
			confirm := m.screenIdle && m.activityLocked() != herd.ActivityIdle &&
				m.capturedAt.Sub(m.screenSince) < confirmIdle && now.Sub(m.screenSince) >= confirmIdle
			want = (moved && since >= gap) || confirm || since >= quietEvery
		} else {
			want = hashWantedLocked(m, stallpolicy.Threshold(w.wdConfig(), m.hook.InTool), now)
			if !want {
				// A pane hash compares captures of one silent spell only.
				m.paneHashed = false
			}
		}
		last := m.capturedAt
		m.mu.Unlock()
		if !want {
			continue
		}
		// The agent's own pane, as the prober's last listing saw it: a
		// pane a user split off and made active is not the agent's output.
		if pane, ok := snap.Own(it.S.Name, it.Inc.Root.PID); ok {
			caps = append(caps, capture{it: it, pane: pane.ID, last: last})
		}
	}
	sort.Slice(caps, func(i, j int) bool { return caps[i].last.Before(caps[j].last) })
	if len(caps) > maxPaneCaptures {
		caps = caps[:maxPaneCaptures]
	}
	loop.Each(cfg.Probe.Concurrency, caps, func(c capture) {
		b, err := w.o.Tmux.CapturePane(ctx, c.pane)
		if err != nil {
			return // the prober reports an unreachable tmux
		}
		if screenKind(c.it.m.kind) {
			w.readScreen(ctx, c.it, string(b), now)
			return
		}
		h := fnv.New64a()
		h.Write(b)
		sum := h.Sum64()
		m := c.it.m
		m.mu.Lock()
		defer m.mu.Unlock()
		m.capturedAt = now
		m.captures++
		if m.paneHashed && sum != m.paneHash {
			m.noteActivityLocked(now)
		}
		m.paneHash, m.paneHashed = sum, true
	})
}

// hashWantedLocked reports whether the pane of an agent herd cannot read
// (m, locked) is captured and hashed at now: only where the listing shows
// no window_activity, once it was silent half its stall threshold, at
// most once per quarter threshold (a silent fleet costs a trickle of
// captures, never one each per tick).
func hashWantedLocked(m *incWatch, threshold time.Duration, now time.Time) bool {
	return m.winActivity.IsZero() && threshold > 0 && now.Sub(m.lastActivity) >= threshold/2 && now.Sub(m.capturedAt) >= threshold/4
}

// readScreen folds one capture of an agent herd can read into its memory:
// a changed normalised screen is progress; the activity the screen proves
// (see screenActivity) is recorded, serialized with hook reports.
func (w *Watchdog) readScreen(ctx context.Context, it watchItem, text string, now time.Time) {
	m := it.m
	sc := agents.ClassifyScreen(m.kind, text)
	m.mu.Lock()
	m.capturedAt = now
	m.captures++
	m.winCaptured = m.winActivity
	if sc.Hash != m.screenHash {
		if m.screenHash != "" {
			m.noteActivityLocked(now)
		}
		m.screenHash, m.screenSince = sc.Hash, now
	}
	m.screenIdle = sc.Activity == herd.ActivityIdle
	m.mu.Unlock()

	m.hookMu.Lock()
	defer m.hookMu.Unlock()
	m.mu.Lock()
	prev := m.hook
	act, reason, ok := screenActivity(screenFacts{
		Screen: sc, Current: m.activityLocked(), Reason: prev.Reason,
		HooksSeen: m.hookSeen, LastHookAt: m.hookAt, Since: m.screenSince, Now: now,
	})
	m.mu.Unlock()
	if !ok {
		return
	}
	what := "prompt"
	switch {
	case sc.Dialog != "":
		what = sc.Dialog + " dialog"
	case sc.Running:
		what = "spinner"
	}
	next := agents.Apply(prev, agents.Signal{Event: screenSource, Activity: act, Reason: reason})
	applied, err := w.st.Activity(ctx, status.Seen{Session: it.S.Name, Incarnation: it.Inc.ID,
		Activity: act, Source: screenSource, What: what, Reason: reason})
	if err != nil {
		if ctx.Err() == nil {
			w.o.Log.Warn("watchdog: record screen activity", "session", it.S.Name, "err", err)
		}
		return
	}
	if !applied {
		return
	}
	m.mu.Lock()
	m.hook = next
	// A new activity starts the stall clock afresh, as a hook's would.
	m.noteActivityLocked(now)
	m.mu.Unlock()
}
