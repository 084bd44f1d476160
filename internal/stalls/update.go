package stalls

import (
	"context"
	"fmt"
	"time"

	"herd"
	"herd/internal/slots"
	"herd/internal/store"
)

// updateRestartTimeout bounds a restart_on_update restart: the stop's
// grace period and the relaunch.
const updateRestartTimeout = 2 * time.Minute

// watchBinaries notices agents whose executable was replaced on disk while
// they ran (an update: /proc/PID/exe reads "(deleted)"): the session is
// OUTDATED with reason binary_updated, said once in an outdated event;
// with its role's restart_on_update it is restarted, resuming its
// conversation, at its first idle moment (never mid-turn).
func (w *Stalls) watchBinaries(ctx context.Context, items []watchItem, roles map[string]herd.Role) {
	now := time.Now()
	for _, it := range items {
		m := it.m
		m.mu.Lock()
		exe, restarting := m.exeReplaced, m.updateRestart
		check := exe == "" && now.Sub(m.exeCheckedAt) >= binaryCheckEvery
		if check {
			m.exeCheckedAt = now
		}
		m.mu.Unlock()
		if check {
			exe = w.checkBinary(ctx, it)
		}
		if exe == "" || restarting || !roles[it.S.Role].RestartOnUpdate {
			continue
		}
		if it.S.State != herd.StateRunning || it.S.Activity != herd.ActivityIdle {
			continue // restarted at its next idle moment
		}
		m.mu.Lock()
		m.updateRestart = true
		m.mu.Unlock()
		w.goRestartUpdated(ctx, it, exe)
	}
}

// goRestartUpdated runs restartUpdated in the background. A function of
// its own so that only this path moves the item to the heap, not every
// item of every tick.
func (w *Stalls) goRestartUpdated(ctx context.Context, it watchItem, exe string) {
	w.kills.Go("restart on update", func() { w.restartUpdated(ctx, it, exe) })
}

// binaryCheckEvery spaces the reads of one agent's executable: an update
// is not urgent, and a thousand agents are not read every tick.
const binaryCheckEvery = 5 * time.Second

// checkBinary reads the agent's executable and, when it was replaced,
// remembers it and records the outdated event; it returns its path, or ""
// while the binary is current. The identity is checked after the read, so
// a pid reused meanwhile is never taken for the agent.
func (w *Stalls) checkBinary(ctx context.Context, it watchItem) string {
	id := it.Inc.Identity
	if id.Zero() {
		return ""
	}
	path, deleted, err := w.o.Proc.Exe(id.PID)
	if err != nil || !deleted || w.o.Proc.Check(id, w.o.BootID) != herd.Alive {
		return ""
	}
	m := it.m
	m.mu.Lock()
	m.exeReplaced = path
	m.mu.Unlock()
	msg := fmt.Sprintf("the agent's binary %s was replaced on disk; the session runs the old one", path)
	w.o.Log.Info("agent binary replaced while running", "session", it.S.Name, "exe", path)
	err = w.st.Update(ctx, it.S.Name, it.Inc.ID, func(_ store.Tx, cur *herd.Session) ([]*herd.Event, error) {
		return []*herd.Event{w.st.Event(*cur, it.Inc.ID, herd.EventOutdated, herd.ReasonBinaryUpdated, msg,
			map[string]any{"exe": path, "pid": id.PID})}, nil
	})
	if err != nil && ctx.Err() == nil {
		w.o.Log.Warn("watchdog: record the replaced binary", "session", it.S.Name, "err", err)
	}
	return path
}

// restartUpdated restarts an idle session whose binary was replaced,
// through the stop path, resuming its conversation.
func (w *Stalls) restartUpdated(ctx context.Context, it watchItem, exe string) {
	defer func() {
		it.m.mu.Lock()
		it.m.updateRestart = false
		it.m.mu.Unlock()
	}()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), updateRestartTimeout)
	defer cancel()
	cur, err := w.st.Session(rctx, it.S.Name)
	if err != nil || cur.Incarnation != it.Inc.ID || cur.State != herd.StateRunning || cur.Activity != herd.ActivityIdle {
		return // moved on meanwhile; judged again at the next tick
	}
	fresh, err := w.o.Slots.Restart(rctx, slots.RestartRequest{
		Name: it.S.Name, Reason: herd.ReasonBinaryUpdated, Resume: true,
		Data: map[string]any{"exe": exe},
	})
	if err != nil {
		w.o.Log.Warn("watchdog: restart after the agent's update failed", "session", it.S.Name, "err", err)
		return
	}
	w.o.Log.Info("agent restarted on its updated binary", "session", it.S.Name, "incarnation", fresh)
}

// BinaryUpdated maps each session with an incarnation that runs an agent
// binary since replaced on disk to that incarnation's id (the caller
// compares it with the session's current one).
func (w *Stalls) BinaryUpdated() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]string{}
	for _, m := range w.incs {
		m.mu.Lock()
		if m.exeReplaced != "" && !m.ended {
			out[m.session] = m.id
		}
		m.mu.Unlock()
	}
	return out
}
