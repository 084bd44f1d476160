package prober

import (
	"context"
	"fmt"
	"time"

	"herd"
	"herd/internal/liveness"
	"herd/internal/proc"
	"herd/internal/status"
)

// watchSet is what watches one incarnation: a context for its watchers and
// the pids being watched (the launched root, and the agent under a wrapper).
type watchSet struct {
	cancel context.CancelFunc
	ctx    context.Context
	pids   map[int]bool
	// others: a process other than the launched root was watched as the
	// agent at some point (a wrapper's agent). Until then the root's death
	// is the agent's, with no store read to look for an agent under it.
	others bool
	// identified: the agent's identity was known and watched at some
	// point (see holds).
	identified bool
	// zombies holds, by pid, how agents not launched as the root ended,
	// read from their zombies when their watchers fired.
	zombies map[int]proc.Exit
}

// Watch notices the death of an incarnation's processes the moment it
// happens: by reaping the root when it is this daemon's child (exact exit
// status), and by polling the agent's pidfd when the agent is another
// process or not our child. A death is then recorded (exec) or handed to
// the prober, which reads the exit status from the pane (tmux). Calling
// watch again when the agent is first identified adds its watcher.
func (p *Prober) Watch(session string, inc herd.Incarnation, wait func() herd.Exit) {
	p.mu.Lock()
	ws, ok := p.watched[inc.ID]
	if !ok {
		ctx, cancel := context.WithCancel(p.ctx)
		ws = &watchSet{ctx: ctx, cancel: cancel, pids: map[int]bool{}}
		p.watched[inc.ID] = ws
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
	if !agent.Zero() && agent != inc.Root {
		ws.others = true
	}
	if !agent.Zero() {
		ws.identified = true
	}
	p.mu.Unlock()

	if waitRoot {
		// Not in the group: a child's wait ends only with the child,
		// which outlives the daemon. The daemon exiting ends it anyway.
		go func() {
			exit := wait()
			if p.ctx.Err() != nil {
				return // the daemon is stopping; the next daemon adopts
			}
			p.onDeath(session, inc, exit, inc.Root)
		}()
	}
	if watchAgent {
		p.group.Go("watch", func() {
			err := proc.WaitExit(ws.ctx, p.o.Proc, agent, p.o.BootID)
			if ws.ctx.Err() != nil {
				return
			}
			if err != nil {
				// Not ours to begin with, or unreadable: /proc polling by
				// the prober takes over.
				p.dropWatch(inc.ID, agent.PID)
				p.Kick()
				return
			}
			if agent != inc.Root {
				// At once, before its launcher reaps it.
				p.noteZombie(inc.ID, agent)
			}
			p.onDeath(session, inc, herd.Exit{Reason: herd.ReasonProcessGone}, agent)
		})
	}
}

// Unwatch stops watching an incarnation.
func (p *Prober) Unwatch(inc string) {
	p.mu.Lock()
	ws := p.watched[inc]
	delete(p.watched, inc)
	delete(p.provisional, inc)
	p.mu.Unlock()
	if ws != nil {
		ws.cancel()
	}
}

// dropWatch forgets one pid's watcher so the prober looks at it again.
func (p *Prober) dropWatch(inc string, pid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ws := p.watched[inc]; ws != nil {
		delete(ws.pids, pid)
	}
}

// isWatched reports whether the agent process of inc (its recorded pid)
// has a watcher, so polling it would be redundant.
func (p *Prober) isWatched(inc herd.Incarnation) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.watched[inc.ID]
	return ws != nil && !inc.Identity.Zero() && ws.pids[inc.Identity.PID]
}

// holds reports whether this daemon holds incarnation inc with its agent
// identified: it launched or adopted the agent and has not let it go
// (Unwatch), whether or not a watcher of one of its pids is up. A launch
// whose process was never proven (a runtime naming another pid) is not
// held: the agent found later by its marker is adopted.
func (p *Prober) holds(inc string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.watched[inc]
	return ws != nil && ws.identified
}

// watchingPID reports whether pid of incarnation inc has a watcher.
func (p *Prober) watchingPID(inc string, pid int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.watched[inc]
	return ws != nil && ws.pids[pid]
}

// onDeath handles a death seen by a watcher. Whatever happens, a death
// that is not recorded here leaves the incarnation to the prober: nothing
// is lost.
func (p *Prober) onDeath(session string, inc herd.Incarnation, exit herd.Exit, who herd.Identity) {
	if who != inc.Root && p.followRelaunch(session, inc, who) {
		// Its launcher started the agent again: the new process is
		// watched, and this exit is no death.
		return
	}
	if inc.RuntimeKind == herd.RuntimeTmux {
		// The pane holds the exit status; the prober reads it right away,
		// listing this session alone. The death itself is proven: it is
		// accounted whatever tmux says, at once if tmux does not answer.
		p.dropWatch(inc.ID, who.PID)
		p.group.Go("proven death", func() { p.confirmDeath(session, inc, who) })
		return
	}
	if who == inc.Root && p.mayBeWrapped(inc.ID) && p.agentOutlivesWrapper(session, inc.ID) {
		return
	}
	msg := ""
	if who != inc.Root {
		// The agent died under a wrapper: its own exit when it is known,
		// else gone.
		inc.Identity = who
		exit, msg = p.agentExit(inc, herd.Exit{Reason: herd.ReasonProcessGone})
	}
	// An agent dead under a wrapper that lives on leaves the wrapper for
	// slots to take down (told by the writer's subscription).
	ok, err := p.st.RecordDeath(p.ctx, status.Death{Session: session, Incarnation: inc.ID, Exit: exit, Message: msg, Leftover: who != inc.Root})
	if err != nil || !ok {
		if err != nil && p.ctx.Err() == nil {
			p.o.Log.Error("record death", "session", session, "err", err)
		}
		// Not recorded (a stop or stall kill owns it, or the store failed):
		// let the prober look again rather than trust a stale watcher.
		p.dropWatch(inc.ID, who.PID)
		p.Kick()
		return
	}
}

// mayBeWrapped reports whether the incarnation's root may be a wrapper
// around another agent process: one was watched as its agent, or its
// watchers are gone (then the store says). The death of a root that is
// the agent itself is recorded without reading the store first: a read
// that waits behind the readers of a large fleet delays the crash.
func (p *Prober) mayBeWrapped(inc string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.watched[inc]
	return ws == nil || ws.others
}

// agentOutlivesWrapper handles the exit of an exec incarnation's launched
// process when the agent found under it is another process: while that
// agent lives, the wrapper's exit is not the agent's death (the agent was
// started in the background and the wrapper returned). The agent keeps or
// gets its own watcher, and its death is the one recorded.
func (p *Prober) agentOutlivesWrapper(session, incID string) bool {
	cur, err := p.st.Incarnation(p.ctx, incID)
	if err != nil || cur.EndedAt != nil || cur.Identity.Zero() || cur.Identity == cur.Root {
		return false
	}
	switch p.o.Proc.Check(cur.Identity, p.o.BootID) {
	case herd.Dead:
		return false
	case herd.Unknown:
		// Unknown is never dead: the prober reads it, and records its
		// death once it is one.
		p.o.Log.Warn("the launched wrapper exited; its agent cannot be read, left to the prober", "session", session, "wrapper_pid", cur.Root.PID, "agent_pid", cur.Identity.PID)
		p.dropWatch(cur.ID, cur.Root.PID)
		p.Kick()
		return true
	}
	p.o.Log.Info("the launched wrapper exited; its agent lives on and stays watched", "session", session, "wrapper_pid", cur.Root.PID, "agent_pid", cur.Identity.PID)
	p.dropWatch(cur.ID, cur.Root.PID)
	// Under the session's lock and only while the incarnation is current,
	// so that a stop that ended it meanwhile leaves no watcher behind.
	_, err = p.st.WhileCurrent(p.ctx, session, cur.ID, func() { p.Watch(session, cur, nil) })
	p.logged(p.ctx, session, "watch the agent", err)
	return true
}

// confirmDeath accounts the death of a tmux agent that its pidfd proved,
// from a listing of its session alone: the pane's exit status when tmux
// has reaped the agent, the first listings nudging tmux to do so. When
// tmux does not answer, or still shows the pane running after
// tmuxCatchUp, the death is accounted as it is (process_gone) through the
// one crash path. Either way it is counted once, and no other session is
// read or listed. A process /proc still shows alive is never accounted.
func (p *Prober) confirmDeath(session string, inc herd.Incarnation, who herd.Identity) {
	if p.o.Proc.Check(who, p.o.BootID) == herd.Alive {
		// A pidfd fires only once its process is gone, and then /proc
		// cannot show it alive with its pid and start time: the watcher's
		// word was wrong. Unknown is never dead; nothing is accounted,
		// and the next round watches it again.
		p.o.Log.Error("a watcher reported an exit, yet the process reads alive; not accounted", "session", session, "pid", who.PID)
		p.Kick()
		return
	}
	select {
	case p.targeted <- struct{}{}:
		defer func() { <-p.targeted }()
	case <-p.ctx.Done():
		return
	}
	ctx := p.ctx
	deadline := time.Now().Add(tmuxCatchUp)
	wait := time.Millisecond
	for {
		l, ok, err := p.st.LiveOne(ctx, session)
		if err == nil && (!ok || l.Inc.ID != inc.ID) {
			return // accounted meanwhile (a full round, a stop)
		}
		if err == nil {
			callCtx, cancel := context.WithTimeout(ctx, p.o.Interval)
			snap := p.o.Tmux.ObserveSession(callCtx, session)
			cancel()
			if snap.Err != nil {
				break // tmux does not answer: the pidfd's word stands alone
			}
			if d := p.decideTmux(ctx, l.S, l.Inc, snap); d.v.Action == liveness.Crash {
				p.actTmux(ctx, d)
				return
			}
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
	exit, msg := p.agentExit(inc, herd.Exit{Reason: herd.ReasonProcessGone})
	if msg == "" {
		msg = fmt.Sprintf("agent process %d exited (its pidfd fired); tmux did not report its pane", who.PID)
	}
	p.recordDeath(ctx, status.Death{Session: session, Incarnation: inc.ID, Exit: exit, Message: msg})
}
