package prober

import (
	"context"
	"fmt"
	"os"
	"time"

	"herd"
	"herd/internal/agents"
	"herd/internal/proc"
	"herd/internal/status"
)

// unconfirmedGrace is how long a launch's write-ahead record may go
// without a process before the prober resolves it: the launch that wrote
// it is its owner until then.
const unconfirmedGrace = 10 * time.Second

// unconfirmed reports whether inc is a launch's write-ahead record whose
// process was never recorded.
func unconfirmed(inc herd.Incarnation) bool { return inc.Root.PID == 0 }

// unproven reports whether inc's launched process, named by the runtime,
// lives on without the launch's marker at the end of the launch's grace,
// and no agent was found: the runtime named another process. It is set
// aside, and inc resolved as an unfinished launch (what carries the
// marker is adopted).
func (p *Prober) unproven(inc herd.Incarnation) bool {
	if !inc.Identity.Zero() || time.Since(inc.StartedAt) < unconfirmedGrace {
		return false
	}
	cur, err := p.o.Proc.Identify(inc.Root.PID, p.o.BootID)
	return err == nil && cur.StartTime == inc.Root.StartTime && cur.Marker != inc.ID
}

// resolveTimeout bounds the resolution of a round's unfinished launches:
// their scan of /proc and their writes, which may take longer than a
// probe interval on a busy machine (bound by the round's deadline, they
// would fail every round and never be resolved).
const resolveTimeout = 10 * time.Second

// resolveUnconfirmedAll settles the unfinished launches of one round with
// one scan of /proc for all of them: a daemon killed during a wave of
// launches leaves several, and a scan per launch would cost a read of
// every process's environment each.
func (p *Prober) resolveUnconfirmedAll(ctx context.Context, items []status.Live) {
	var due []status.Live
	markers := map[string]bool{}
	for _, it := range items {
		if time.Since(it.Inc.StartedAt) >= unconfirmedGrace {
			due = append(due, it)
			markers[it.Inc.ID] = true
		}
	}
	if len(due) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	found, err := markedAll(p.o.Proc, p.o.BootID, markers)
	for _, it := range due {
		if err != nil {
			p.markUnknown(ctx, it.S, it.Inc.ID, fmt.Sprintf("an unfinished launch cannot be resolved: %v", err))
			continue
		}
		p.resolveUnconfirmed(ctx, it.S, it.Inc, found[it.Inc.ID])
	}
}

// markedAll returns, by marker, the live processes carrying one of
// markers as their HERD_INCARNATION: one pass over /proc.
func markedAll(fs proc.FS, bootID string, markers map[string]bool) (map[string][]herd.Identity, error) {
	pids, err := fs.PIDs()
	if err != nil {
		return nil, fmt.Errorf("prober: %w", err)
	}
	self := os.Getpid()
	out := map[string][]herd.Identity{}
	for _, pid := range pids {
		if pid == self {
			continue
		}
		env, err := fs.Environ(pid)
		if err != nil || !markers[env[herd.EnvIncarnation]] {
			continue
		}
		// Identify reads the start time around the marker, so a pid
		// reused meanwhile is not mistaken for ours.
		id, err := fs.Identify(pid, bootID)
		if err != nil || id.Marker != env[herd.EnvIncarnation] {
			continue
		}
		out[id.Marker] = append(out[id.Marker], id)
	}
	return out, nil
}

// resolveUnconfirmed settles a write-ahead record left by a launch that
// did not finish (the daemon was killed between the start and its
// record), given the processes carrying its marker (ids): the one whose
// parent does not is the launched one, and is adopted; with none, the
// launch ended without an agent and that is accounted like a failed
// launch.
func (p *Prober) resolveUnconfirmed(ctx context.Context, s herd.Session, inc herd.Incarnation, ids []herd.Identity) {
	fs := p.o.Proc
	if len(ids) == 0 {
		p.recordDeath(ctx, status.Death{Session: s.Name, Incarnation: inc.ID, Exit: herd.Exit{Reason: herd.ReasonLaunchFailed},
			Message: "the launch did not finish (the daemon stopped during it) and no process carries its marker"})
		return
	}
	marked := map[int]bool{}
	for _, id := range ids {
		marked[id.PID] = true
	}
	var root herd.Identity
	for _, id := range ids {
		st, err := fs.Stat(id.PID)
		if err != nil || marked[st.PPID] {
			continue
		}
		if root.Zero() || id.StartTime < root.StartTime {
			root = id
		}
	}
	if root.Zero() {
		return // every marked process's parent is marked: read again next round
	}
	inc.Root = root
	role, err := p.st.Role(ctx, s.Role)
	if err != nil {
		return
	}
	if id, found := FindAgent(fs, p.o.BootID, agents.Names(role.Agent, role.AgentProcess), inc); found.Found() {
		inc.Identity = id
		p.setProvisional(inc.ID, found == FoundLauncher)
	}
	p.o.Log.Info("adopted the agent of an unfinished launch", "session", s.Name, "pid", root.PID)
	if inc.Identity.Zero() {
		p.recordRoot(ctx, s, inc)
		return
	}
	p.markAlive(ctx, s, inc, herd.EventAdopted)
}

// recordRoot stores the launched process of an incarnation whose agent is
// not found yet: the incarnation is adopted (and says so in the log).
func (p *Prober) recordRoot(ctx context.Context, s herd.Session, inc herd.Incarnation) {
	_, err := p.st.RootFound(ctx, s.Name, inc)
	p.logged(ctx, s.Name, "record the launched process", err)
}

// proveRoot returns the launched process's identity once it carries the
// incarnation's marker (it may not have when the launch recorded it).
func (p *Prober) proveRoot(inc herd.Incarnation) (herd.Identity, bool) {
	cur, err := p.o.Proc.Identify(inc.Root.PID, p.o.BootID)
	if err != nil || cur.StartTime != inc.Root.StartTime || cur.Marker != inc.ID {
		return herd.Identity{}, false
	}
	return cur, true
}
