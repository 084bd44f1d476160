package watchdog

import (
	"context"
	"fmt"
	"time"

	"herd"
	"herd/internal/proc"
	"herd/internal/slots"
)

// updateRestartTimeout bounds a restart_on_update restart: the stop's
// grace period and the relaunch.
const updateRestartTimeout = 2 * time.Minute

// watchBinaries notices agents whose executable was replaced on disk while
// they ran (an update: /proc/PID/exe reads "(deleted)"): the session is
// OUTDATED with reason binary_updated, said once in an outdated event;
// with its role's restart_on_update it is restarted, resuming its
// conversation, at its first idle moment (never mid-turn).
//
// An agent whose running file is known is not read again while the file at
// its path is still that file: the path is stat'ed once per
// binaryCheckEvery for all the agents that run it (a fleet of one binary
// costs one stat, not one read per agent).
func (w *Watchdog) watchBinaries(ctx context.Context, items []watchItem, roles map[string]herd.Role) {
	now := time.Now()
	for _, it := range items {
		m := it.m
		m.mu.Lock()
		exe, restarting := m.exeReplaced, m.updateRestart
		path, id := m.exePath, m.exeID
		check := exe == "" && (!id.Zero() || now.Sub(m.exeCheckedAt) >= binaryCheckEvery)
		m.mu.Unlock()
		if check && !id.Zero() {
			// The agent is read only once its path names another file.
			check = w.fileAt(path, now) != id
		}
		if check {
			m.mu.Lock()
			m.exeCheckedAt = now
			m.mu.Unlock()
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
func (w *Watchdog) goRestartUpdated(ctx context.Context, it watchItem, exe string) {
	w.kills.Go("restart on update", func() { w.restartUpdated(ctx, it, exe) })
}

// binaryCheckEvery spaces the reads of one agent's executable: an update
// is not urgent, and a thousand agents are not read every tick.
const binaryCheckEvery = 5 * time.Second

// checkBinary reads the agent's executable and, when it was replaced,
// remembers it and records the outdated event; it returns its path, or ""
// while the binary is current. The identity is checked after the read, so
// a pid reused meanwhile is never taken for the agent.
func (w *Watchdog) checkBinary(ctx context.Context, it watchItem) string {
	id := it.Inc.Identity
	if id.Zero() {
		return ""
	}
	path, deleted, err := w.o.Proc.Exe(id.PID)
	if err != nil {
		return ""
	}
	m := it.m
	if !deleted {
		// Remember the file it runs (read before the identity check, so
		// never a stranger's): later ticks compare it with the file at
		// its path instead of reading the agent again. Unreadable, the
		// agent is read every binaryCheckEvery as before.
		fid, err := w.o.Proc.ExeID(id.PID)
		if err != nil || w.o.Proc.Check(id, w.o.BootID) != herd.Alive {
			fid = proc.FileID{}
		}
		m.mu.Lock()
		m.exePath, m.exeID = path, fid
		m.mu.Unlock()
		return ""
	}
	if w.o.Proc.Check(id, w.o.BootID) != herd.Alive {
		return ""
	}
	m.mu.Lock()
	m.exeReplaced = path
	m.mu.Unlock()
	msg := fmt.Sprintf("the agent's binary %s was replaced on disk; the session runs the old one", path)
	w.o.Log.Info("agent binary replaced while running", "session", it.S.Name, "exe", path)
	_, err = w.st.Outdated(ctx, it.S.Name, it.Inc.ID, herd.ReasonBinaryUpdated, msg, map[string]any{"exe": path, "pid": id.PID})
	if err != nil && ctx.Err() == nil {
		w.o.Log.Warn("watchdog: record the replaced binary", "session", it.S.Name, "err", err)
	}
	return path
}

// exeStat is what the watchdog last saw at an agent binary's path.
type exeStat struct {
	at time.Time
	id proc.FileID // zero: nothing readable there
}

// fileAt returns the identity of the file at path, stat'ed at most once
// per binaryCheckEvery (zero when it cannot be read: gone, replaced by
// nothing).
func (w *Watchdog) fileAt(path string, now time.Time) proc.FileID {
	w.mu.Lock()
	defer w.mu.Unlock()
	if st, ok := w.exeStats[path]; ok && now.Sub(st.at) < binaryCheckEvery {
		return st.id
	}
	id, err := proc.FileIDOf(path)
	if err != nil {
		id = proc.FileID{}
	}
	if w.exeStats == nil {
		w.exeStats = map[string]exeStat{}
	}
	for p, st := range w.exeStats {
		if now.Sub(st.at) > time.Hour {
			delete(w.exeStats, p) // no agent runs it any more
		}
	}
	w.exeStats[path] = exeStat{at: now, id: id}
	return id
}

// restartUpdated restarts an idle session whose binary was replaced,
// through the stop path, resuming its conversation.
func (w *Watchdog) restartUpdated(ctx context.Context, it watchItem, exe string) {
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
