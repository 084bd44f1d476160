package stalls

import (
	"context"
	"hash/fnv"
	"sort"
	"time"

	"herd/internal/loop"
	"herd/internal/watchdog"
)

// maxPaneCaptures bounds the capture-pane calls of one watchdog tick.
const maxPaneCaptures = 16

// watchTmux folds the tmux evidence of output into the memory of tmux
// sessions: window_activity from the prober's last listing (it moves on
// output, unlike session_activity), and, for sessions that look silent
// only, a change of the visible content of the agent's own pane (a cheap
// hash of capture-pane).
func (w *Stalls) watchTmux(ctx context.Context, items []watchItem, now time.Time) {
	if len(items) == 0 {
		return
	}
	snap := w.o.Prober.Last()
	acts := make(map[string]time.Time, len(items))
	for _, it := range items {
		if p, ok := snap.Own(it.S.Name, it.Inc.Root.PID); ok && !p.Activity.IsZero() {
			acts[it.S.Name] = p.Activity
		} else if r, ok := snap.Session(it.S.Name); ok && !r.Activity.IsZero() {
			acts[it.S.Name] = r.Activity
		}
	}

	type silent struct {
		it      watchItem
		silence time.Duration
	}
	var quiet []silent
	for _, it := range items {
		m := it.m
		m.mu.Lock()
		if wa, ok := acts[it.S.Name]; ok && wa.After(m.winActivity) {
			m.winActivity = wa
			if wa.After(now) {
				wa = now
			}
			m.noteActivityLocked(wa)
		}
		silence := now.Sub(m.lastActivity)
		threshold := watchdog.Threshold(w.wdConfig(), m.hook.InTool)
		looksSilent := threshold > 0 && silence >= threshold/2
		if !looksSilent {
			// A pane hash compares captures of one silent spell only.
			m.paneHashed = false
		}
		// At most one capture per agent per quarter threshold: a silent
		// fleet costs a trickle of captures, never one each per tick.
		due := looksSilent && now.Sub(m.capturedAt) >= threshold/4
		m.mu.Unlock()
		if due {
			quiet = append(quiet, silent{it, silence})
		}
	}
	sort.Slice(quiet, func(i, j int) bool { return quiet[i].silence > quiet[j].silence })
	if len(quiet) > maxPaneCaptures {
		quiet = quiet[:maxPaneCaptures]
	}
	loop.Each(w.cfg().Probe.Concurrency, quiet, func(q silent) {
		// The agent's own pane, as the prober's last listing saw it: a
		// pane a user split off and made active is not the agent's output.
		pane, ok := snap.Own(q.it.S.Name, q.it.Inc.Root.PID)
		if !ok {
			return // not in the last listing: nothing to compare
		}
		q.it.m.mu.Lock()
		q.it.m.capturedAt = now
		q.it.m.mu.Unlock()
		b, err := w.o.Tmux.CapturePane(ctx, pane.ID)
		if err != nil {
			return // the prober reports an unreachable tmux
		}
		h := fnv.New64a()
		h.Write(b)
		sum := h.Sum64()
		m := q.it.m
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.paneHashed && sum != m.paneHash {
			m.noteActivityLocked(now)
		}
		m.paneHash, m.paneHashed = sum, true
	})
}
