package daemon

import (
	"context"

	"herd"
	"herd/internal/proc"
	"herd/internal/store"
)

// watchSet is what watches one incarnation: a context for its watchers and
// the pids being watched (the launched root, and the agent under a wrapper).
type watchSet struct {
	cancel context.CancelFunc
	ctx    context.Context
	pids   map[int]bool
}

// watch notices the death of an incarnation's processes the moment it
// happens: by reaping the root when it is this daemon's child (exact exit
// status), and by polling the agent's pidfd when the agent is another
// process or not our child. A death is then recorded (exec) or handed to
// the prober, which reads the exit status from the pane (tmux). Calling
// watch again when the agent is first identified adds its watcher.
func (d *Daemon) watch(session string, inc herd.Incarnation, wait func() herd.Exit) {
	d.mu.Lock()
	ws, ok := d.watched[inc.ID]
	if !ok {
		ctx, cancel := context.WithCancel(d.watchCtx)
		ws = &watchSet{ctx: ctx, cancel: cancel, pids: map[int]bool{}}
		d.watched[inc.ID] = ws
	}
	waitRoot := wait != nil && !ws.pids[inc.Root.PID]
	if waitRoot {
		ws.pids[inc.Root.PID] = true
	}
	agent := inc.Identity
	watchAgent := !agent.Zero() && !ws.pids[agent.PID]
	if watchAgent {
		ws.pids[agent.PID] = true
	}
	d.mu.Unlock()

	if waitRoot {
		go func() {
			exit := wait()
			if d.watchCtx.Err() != nil {
				return // the daemon is stopping; the next daemon adopts
			}
			d.onDeath(session, inc, exit, inc.Root)
		}()
	}
	if watchAgent {
		go func() {
			err := proc.WaitExit(ws.ctx, d.proc, agent, d.bootID)
			if ws.ctx.Err() != nil {
				return
			}
			if err != nil {
				// Not ours to begin with, or unreadable: /proc polling by
				// the prober takes over.
				d.dropWatch(inc.ID, agent.PID)
				wake(d.probeKick)
				return
			}
			d.onDeath(session, inc, herd.Exit{Reason: herd.ReasonProcessGone}, agent)
		}()
	}
}

// unwatch stops watching an incarnation.
func (d *Daemon) unwatch(inc string) {
	d.mu.Lock()
	ws := d.watched[inc]
	delete(d.watched, inc)
	d.mu.Unlock()
	if ws != nil {
		ws.cancel()
	}
}

// dropWatch forgets one pid's watcher so the prober looks at it again.
func (d *Daemon) dropWatch(inc string, pid int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ws := d.watched[inc]; ws != nil {
		delete(ws.pids, pid)
	}
}

// isWatched reports whether the agent process of inc (its recorded pid)
// has a watcher, so polling it would be redundant.
func (d *Daemon) isWatched(inc herd.Incarnation) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	ws := d.watched[inc.ID]
	return ws != nil && !inc.Identity.Zero() && ws.pids[inc.Identity.PID]
}

// watchingPID reports whether pid of incarnation inc has a watcher.
func (d *Daemon) watchingPID(inc string, pid int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	ws := d.watched[inc]
	return ws != nil && ws.pids[pid]
}

// onDeath handles a death seen by a watcher. Whatever happens, a death
// that is not recorded here leaves the incarnation to the prober: nothing
// is lost.
func (d *Daemon) onDeath(session string, inc herd.Incarnation, exit herd.Exit, who herd.Identity) {
	if inc.RuntimeKind == herd.RuntimeTmux {
		// The pane holds the exit status; the prober reads it right away.
		d.dropWatch(inc.ID, who.PID)
		wake(d.probeKick)
		return
	}
	if who == inc.Root && d.agentOutlivesWrapper(session, inc.ID) {
		return
	}
	if who != inc.Root {
		// The agent died under a wrapper that lives on: report it as gone.
		exit = herd.Exit{Reason: herd.ReasonProcessGone}
	}
	ok, err := d.recordDeath(d.watchCtx, death{Session: session, Incarnation: inc.ID, Exit: exit})
	if err != nil || !ok {
		if err != nil {
			d.log.Error("record death", "session", session, "err", err)
		}
		// Not recorded (a stop or stall kill owns it, or the store failed):
		// let the prober look again rather than trust a stale watcher.
		d.dropWatch(inc.ID, who.PID)
		wake(d.probeKick)
		return
	}
	if who != inc.Root {
		d.killLeftover(inc)
	}
}

// agentOutlivesWrapper handles the exit of an exec incarnation's launched
// process when the agent found under it is another process: while that
// agent lives, the wrapper's exit is not the agent's death (the agent was
// started in the background and the wrapper returned). The agent keeps or
// gets its own watcher, and its death is the one recorded.
func (d *Daemon) agentOutlivesWrapper(session, incID string) bool {
	var cur herd.Incarnation
	err := d.st.View(d.watchCtx, func(tx store.Tx) error {
		var err error
		cur, err = tx.Incarnation(incID)
		return err
	})
	if err != nil || cur.EndedAt != nil || cur.Identity.Zero() || cur.Identity == cur.Root {
		return false
	}
	switch d.proc.Check(cur.Identity, d.bootID) {
	case herd.Dead:
		return false
	case herd.Unknown:
		// Unknown is never dead: the prober reads it, and records its
		// death once it is one.
		d.log.Warn("the launched wrapper exited; its agent cannot be read, left to the prober", "session", session, "wrapper_pid", cur.Root.PID, "agent_pid", cur.Identity.PID)
		d.dropWatch(cur.ID, cur.Root.PID)
		wake(d.probeKick)
		return true
	}
	d.log.Info("the launched wrapper exited; its agent lives on and stays watched", "session", session, "wrapper_pid", cur.Root.PID, "agent_pid", cur.Identity.PID)
	d.dropWatch(cur.ID, cur.Root.PID)
	// Under the session's lock and only while the incarnation is current,
	// so that a stop that ended it meanwhile leaves no watcher behind.
	d.update(d.watchCtx, session, cur.ID, func(store.Tx, *herd.Session) ([]*herd.Event, error) {
		d.watch(session, cur, nil)
		return nil, nil
	})
	return true
}
