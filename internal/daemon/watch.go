package daemon

import (
	"context"

	"herd"
	"herd/internal/proc"
)

// watch notices the death of an incarnation's agent the moment it happens:
// by reaping it when it is this daemon's child (exact exit status), else by
// polling its pidfd. A death is then recorded (exec) or handed to the prober,
// which reads the exit status from the pane (tmux).
func (d *Daemon) watch(session string, inc herd.Incarnation, wait func() herd.Exit) {
	d.mu.Lock()
	if _, ok := d.watched[inc.ID]; ok {
		d.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(d.watchCtx)
	d.watched[inc.ID] = cancel
	d.mu.Unlock()

	if wait != nil {
		// The root is our child: reap it for its exact exit status.
		go func() {
			exit := wait()
			if ctx.Err() != nil && d.watchCtx.Err() != nil {
				return // the daemon is stopping; the next daemon adopts
			}
			d.onDeath(session, inc, exit, inc.Root)
		}()
	}
	agent := inc.Identity
	if agent.Zero() || (wait != nil && agent == inc.Root) {
		return // nothing else to watch yet; the prober finds the agent
	}
	go func() {
		if err := proc.WaitExit(ctx, d.proc, agent, d.bootID); err != nil {
			if ctx.Err() != nil {
				return
			}
			// Not ours to begin with, or unreadable: the prober decides.
			wake(d.probeKick)
			return
		}
		d.onDeath(session, inc, herd.Exit{Reason: herd.ReasonProcessGone}, agent)
	}()
}

// unwatch stops watching an incarnation.
func (d *Daemon) unwatch(inc string) {
	d.mu.Lock()
	cancel := d.watched[inc]
	delete(d.watched, inc)
	d.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (d *Daemon) isWatched(inc string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.watched[inc]
	return ok
}

// onDeath handles a death seen by a watcher.
func (d *Daemon) onDeath(session string, inc herd.Incarnation, exit herd.Exit, who herd.Identity) {
	if d.isStopping(inc.ID) {
		return
	}
	if inc.RuntimeKind == herd.RuntimeTmux {
		// The pane holds the exit status; the prober reads it right away.
		wake(d.probeKick)
		return
	}
	if who != inc.Root {
		// The agent died under a wrapper that lives on: report it as gone.
		exit = herd.Exit{Reason: herd.ReasonProcessGone}
	}
	ok, err := d.recordDeath(d.watchCtx, death{Session: session, Incarnation: inc.ID, Exit: exit})
	if err != nil {
		d.log.Error("record death", "session", session, "err", err)
		return
	}
	if ok && who != inc.Root {
		d.killLeftover(inc)
	}
}
